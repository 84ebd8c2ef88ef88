/**
 * Large writes (issue 50, item 3): a definition's term work is bounded
 * (MAX_TERMS_PER_DEFINITION, refused before its transaction): the audit
 * measured one ~950 KB definition of distinct words (about 76,000 term rows)
 * holding SQLite's whole process 1.1-1.4 s.
 */
import { describe, expect, it } from "vitest";
import { DEFAULT_MAX_TERMS_PER_DEFINITION } from "../../src/domain/search-terms.js";
import { forEachDatabase } from "../support/databases.js";
import { distinctWordsDefinition } from "../support/distinct-words.js";
import { type TestServer, useServer } from "../support/server.js";

const PATH = "/asor/v1/agentDefinition";

const post = (server: TestServer, body: unknown) =>
  fetch(`${server.baseUrl}${PATH}`, {
    method: "POST",
    headers: { authorization: server.authorization, "content-type": "application/json" },
    body: JSON.stringify(body),
  });

const count = async (server: TestServer): Promise<number> => {
  const res = await fetch(`${server.baseUrl}${PATH}?limit=1`, { headers: { authorization: server.authorization } });
  return ((await res.json()) as { total: number }).total;
};

forEachDatabase((db) => {
  describe("MAX_TERMS_PER_DEFINITION at its default", () => {
    const server = useServer(db);

    it("refuses a ~950 KB definition of 86,000 distinct words with 400 TOO_MANY_TERMS naming the setting", async () => {
      const res = await post(server(), distinctWordsDefinition("Wordy", 0, 86_000));
      expect(res.status).toBe(400);
      const body = (await res.json()) as {
        errors: Array<{ code: string; error: string; field: string; path: string }>;
      };
      expect(body.errors).toEqual([
        expect.objectContaining({ code: "TOO_MANY_TERMS", field: "skills", path: "skills" }),
      ]);
      expect(body.errors[0]?.error).toContain("MAX_TERMS_PER_DEFINITION");
      expect(body.errors[0]?.error).toContain(`at most ${DEFAULT_MAX_TERMS_PER_DEFINITION}`);
      expect(await count(server())).toBe(0);
    });
  });

  describe("MAX_TERMS_PER_DEFINITION set to 1000", () => {
    const server = useServer(db, { MAX_TERMS_PER_DEFINITION: "1000" });

    it("stores a definition of 900 distinct words and refuses one of 1,100, on POST and on PUT", async () => {
      const created = await post(server(), distinctWordsDefinition("Wordy", 0, 900));
      expect(created.status).toBe(201);
      const { id } = (await created.json()) as { id: string };
      const refused = await post(server(), distinctWordsDefinition("Wordier", 0, 1_100));
      expect(refused.status).toBe(400);
      expect(await refused.json()).toMatchObject({ errors: [{ code: "TOO_MANY_TERMS", path: "skills" }] });
      const put = await fetch(`${server().baseUrl}${PATH}/${id}`, {
        method: "PUT",
        headers: { authorization: server().authorization, "content-type": "application/json" },
        body: JSON.stringify(distinctWordsDefinition("Wordy", 0, 1_100)),
      });
      expect(put.status).toBe(400);
      expect(await put.json()).toMatchObject({ errors: [{ code: "TOO_MANY_TERMS", path: "skills" }] });
      expect(await count(server())).toBe(1);
    });
  });
});
