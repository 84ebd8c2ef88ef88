/**
 * The SQL function every costly SQLite search calls once per candidate row
 * (queries/search.ts): 1 on the main connection; in a search worker it throws
 * once the pool has answered the statement's caller (a time limit, a
 * cancelled request), which ends the statement. Neither driver can interrupt
 * a statement otherwise (run/sqlite-search-worker.ts).
 */
export const SEARCH_ALIVE = "search_alive";
