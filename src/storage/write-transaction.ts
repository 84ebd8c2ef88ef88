/**
 * The WriteTransaction the repository hands to `write`'s work
 * (sql-repository.ts): each call is one or two statements of queries/writes.ts
 * on the transaction's connection, and the first race or lost connection
 * dooms the attempt, which the repository then runs again or reports.
 */

import { Buffer } from "node:buffer";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import type { Lifecycle } from "../domain/records.js";
import { type DefinitionIndex, indexSteps, inTurns, sameIndex } from "../domain/search-terms.js";
import { INSTANCE_ID } from "../domain/upsert.js";
import { indexDefinition } from "./queries/search-index.js";
import type { ChangeKind, RevisionChange, RevisionContent, WriteContext } from "./queries/writes.js";
import {
  clearLatest,
  findAgentByNameForUpdate,
  findByKeyForUpdate,
  findExternalIdOwnerForUpdate,
  findInstanceById,
  findInstanceByIdForUpdate,
  findInstancesOfAgentForUpdate,
  findNewestInstanceByReference,
  insertAgent,
  insertDefinition,
  insertExternalId,
  latestOfAgent,
  lockAgent,
  lockSequenceAndFindAgent,
  newestLiveOfAgent,
  readStoredInWrite,
  refreshLatest,
  revisionStatements,
  takeAgentNumber,
  updateStatus,
  writeContent,
} from "./queries/writes.js";
import type {
  AgentRef,
  DefinitionStatus,
  InstanceRef,
  KeyedInstanceRef,
  StoredDefinition,
  UpsertKey,
  WriteTenant,
  WriteTransaction,
} from "./repository.js";
import {
  agentReferenceId,
  encodeDefinition,
  fromDatabaseInteger,
  toAgentRef,
  toDatabaseTimestamp,
  toInstanceRef,
  toStoredDefinition,
} from "./rows.js";
import { classifyDriverError, isBrokenTriggers } from "./run/driver-errors.js";
import { type CommitWith, SQLITE_SLICE_MS } from "./run/writes.js";
import type { KeptText } from "./search-text.js";

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

/** A version this transaction changed: what its change record says, and the answers that show its revision. */
interface PendingChange {
  readonly id: string;
  readonly agentNumber: number;
  kind: ChangeKind;
  readonly at: string;
  /** Its new content, not written yet: the UPDATE goes with COMMIT (update()). */
  content?: RevisionChange["content"];
  /** What the transaction answered about the version; their modRevision is set when it commits. */
  readonly answers: Mutable<StoredDefinition>[];
}

/** Which kind a version changed twice in one write shows: being added, then a status change, then the rest. */
const KIND_RANK: Readonly<Record<ChangeKind, number>> = { ADDED: 3, STATUS_CHANGED: 2, MODIFIED: 1 };

/** The WriteTransaction handed to `write`'s work: the queries, bound to one transaction and tenant. */
export class SqlWriteTransaction implements WriteTransaction {
  readonly tenant: WriteTenant;
  readonly #context: WriteContext;
  #ended = false;
  /** The first race or connection failure of a statement; it dooms the whole attempt. */
  #failure: { readonly error: unknown } | undefined;
  /**
   * Agents whose row this transaction has locked by writing it (MySQL: queries.lockAgent) or created, so
   * their latest flag is ours to move without asking again.
   */
  readonly #lockedAgents = new Set<number>();
  /** Agents this transaction created: they have no other versions whose latest flag would need clearing. */
  readonly #createdAgents = new Set<number>();
  /** The instance prepareInsert announced, and its row once staged (MySQL), until insert() stores it. */
  #pending: Pending | undefined;
  /** The versions changed so far, in order: each takes a revision, in this order, as the transaction commits. */
  readonly #changes = new Map<string, PendingChange>();
  /** MySQL: the full-text text of each version whose content this transaction wrote, kept after COMMIT. */
  readonly #texts = new Map<string, string>();
  /** After COMMIT (settle): the revision each changed version took. */
  readonly #revisions = new Map<string, number>();

  constructor(context: WriteContext, tenant: WriteTenant) {
    this.#context = context;
    this.tenant = tenant;
  }

  async findByKey(key: UpsertKey): Promise<KeyedInstanceRef | undefined> {
    const row = await this.#run((context) => findByKeyForUpdate(context, this.tenant.name, key));
    return row === undefined ? undefined : toInstanceRef(row);
  }

  async findById(id: string): Promise<KeyedInstanceRef | undefined> {
    if (!INSTANCE_ID.test(id)) return undefined;
    const row = await this.#run((context) => findInstanceById(context, this.tenant.name, id));
    return row === undefined ? undefined : toInstanceRef(row);
  }

  async findByIdForUpdate(id: string): Promise<KeyedInstanceRef | undefined> {
    if (!INSTANCE_ID.test(id)) return undefined;
    const row = await this.#run((context) => findInstanceByIdForUpdate(context, this.tenant.name, id));
    return row === undefined ? undefined : toInstanceRef(row);
  }

  async findVersionsForUpdate(agent: AgentRef): Promise<KeyedInstanceRef[]> {
    const rows = await this.#run(async (context) => {
      // The agent first, as every writer that moves its latest flag takes it (queries.lockAgent).
      await this.#lockAgent(context, agent.number);
      return findInstancesOfAgentForUpdate(context, this.tenant.name, agent.number);
    });
    return rows.map(toInstanceRef);
  }

  async isAgentDeactivated(agent: AgentRef): Promise<boolean> {
    return this.#run(async (context) => {
      await this.#lockAgent(context, agent.number);
      return (await newestLiveOfAgent(context, this.tenant.name, agent.number)) === undefined;
    });
  }

  async findNewestByReference(referenceId: string): Promise<InstanceRef | undefined> {
    const row = await this.#run((context) => findNewestInstanceByReference(context, this.tenant.name, referenceId));
    return row === undefined ? undefined : toInstanceRef(row);
  }

  async findAgentByName(providerId: string, name: string): Promise<AgentRef | undefined> {
    const row = await this.#run(async (context) => {
      const tenant = this.tenant.name;
      // Not the agent's lock (#lockAgent, which a new version takes in insert()): a locking read holds on
      // its own node only, and on a Galera cluster only a write of the row keeps another node's writer out.
      const found = await findAgentByNameForUpdate(context, tenant, providerId, name);
      if (found !== undefined) return found;
      if (context.statements.dialect !== "mysql") return undefined;
      // A new agent, most likely: its version's row and index are written before the sequence is held.
      const pending = this.#pending;
      if (
        pending !== undefined &&
        pending.seq === undefined &&
        pending.key.providerId === providerId &&
        pending.key.name === name
      )
        await this.#stage(context, pending);
      // Under READ COMMITTED nothing locks an absent row, and the caller decides on the absence
      // beyond inserting the agent (e.g. an externalAgentID held by someone else is a clash for a
      // new agent): so hold the tenant's sequence, which every creator of an agent holds until
      // it commits, and look again. From here the agent stays absent until we create it. The
      // first look takes no such lock, so new versions of existing agents never queue on it.
      return lockSequenceAndFindAgent(context, tenant, providerId, name);
    });
    return row === undefined ? undefined : toAgentRef(row);
  }

  async findExternalIdOwner(providerId: string, externalAgentId: string): Promise<number | undefined> {
    const row = await this.#run((context) =>
      findExternalIdOwnerForUpdate(context, this.tenant.name, providerId, externalAgentId),
    );
    return row === undefined ? undefined : fromDatabaseInteger(row.agent_number);
  }

  createAgent(providerId: string, name: string): Promise<AgentRef> {
    // The prefix as the transaction read it: a tenant's prefix is set when it is created and no
    // statement changes it, so it need not be read again under the sequence's lock.
    const prefix = this.tenant.sequencePrefix;
    const tenant = this.tenant.name;
    // Everything but the number is ready before the sequence is taken: from there to COMMIT every
    // other creator in the tenant waits.
    const createdAt = toDatabaseTimestamp(new Date());
    return this.#run(async (context) => {
      if (prefix === null) {
        // The service answers A2849 before it gets here; this guards against a bug, not a request.
        throw new Error(`Tenant "${tenant}" has no agent id sequence generator, so it cannot number a new agent.`);
      }
      const number = await takeAgentNumber(context, tenant);
      const referenceId = agentReferenceId(prefix, number);
      await insertAgent(context, {
        tenant,
        number,
        reference_id: referenceId,
        provider_id: providerId,
        name,
        created_at: createdAt,
      });
      // Our own uncommitted row: no one else can lock it or add versions to it before we commit.
      this.#lockedAgents.add(number);
      this.#createdAgents.add(number);
      return { number, referenceId };
    });
  }

  async claimExternalId(providerId: string, externalAgentId: string, agentNumber: number): Promise<void> {
    await this.#run((context) =>
      insertExternalId(context, {
        tenant: this.tenant.name,
        provider_id: providerId,
        external_agent_id: externalAgentId,
        agent_number: agentNumber,
        created_at: toDatabaseTimestamp(new Date()),
      }),
    );
  }

  /**
   * Remembers the new instance insert() will store. On MySQL, when findAgentByName then finds no agent
   * (a new agent, which will take the tenant's next number), the row is inserted there with no agent
   * (agent_number NULL, an empty document) and its search index written, before the sequence is
   * locked: from that lock to COMMIT every other creator of an agent in the tenant waits, and the index
   * (its term rows, their counters by trigger, the keyword text) was most of that section. insert() then
   * gives the row its agent and document in one UPDATE. No reader sees the staged row: it is
   * uncommitted until insert() has completed it, and a work that never calls insert() is refused
   * (throwIfIncomplete). A new version of an agent that exists is written by insert() under the
   * agent's lock, as before: its seq must follow the versions already there (latest = newest by seq).
   */
  async prepareInsert(key: UpsertKey, definition: AgentDefinition, index?: DefinitionIndex): Promise<void> {
    if (this.#pending !== undefined) throw new Error("prepareInsert() was called twice in one write.");
    assertNewInstanceId(definition.id);
    this.#pending = { key, definition, at: new Date(), seq: undefined, index };
  }

  /** Inserts the pending instance's row with no agent, and its index (MySQL; see prepareInsert). */
  async #stage(context: WriteContext, pending: Pending): Promise<void> {
    const timestamp = toDatabaseTimestamp(pending.at);
    const { key, definition } = pending;
    const index = pending.index ?? (await indexOf(definition));
    const seq = await insertDefinition(context, {
      id: definition.id,
      tenant: this.tenant.name,
      name: key.name,
      provider_id: key.providerId,
      version: key.version,
      agent_number: null,
      document: "",
      document_binary: Buffer.alloc(0),
      created_at: timestamp,
      updated_at: timestamp,
      status_changed_at: timestamp,
      is_latest: true,
    });
    this.#keepText(definition.id, await indexDefinition(context, this.tenant.name, definition.id, index, seq));
    this.#pending = { ...pending, seq, index };
  }

  async insert(
    key: UpsertKey,
    agent: AgentRef,
    definition: AgentDefinition,
    given?: DefinitionIndex,
  ): Promise<StoredDefinition> {
    assertNewInstanceId(definition.id);
    const pending = this.#pending;
    if (pending !== undefined && pending.definition.id !== definition.id)
      throw new Error(
        `insert() was given instance ${definition.id}; prepareInsert() announced ${pending.definition.id}.`,
      );
    const now = pending?.at ?? new Date();
    const timestamp = toDatabaseTimestamp(now);
    const encoded = encodeDefinition(definition);
    const index = given ?? (await indexOf(definition));
    const created = this.#createdAgents.has(agent.number);
    const row: NewRow = { key, agent, definition, index, created, timestamp, encoded };
    const { latest, numbering } = await this.#run(async (context): Promise<Inserted> => {
      this.#pending = undefined;
      if (pending?.seq !== undefined) return this.#completeStaged(context, row, pending as Staged);
      await this.#insertRow(context, row);
      return { latest: true, numbering: undefined };
    });
    const stored: Mutable<StoredDefinition> = {
      id: definition.id,
      tenant: this.tenant.name,
      agent,
      json: encoded.json,
      binary: encoded.binary,
      createdAt: now,
      updatedAt: now,
      revision: 1,
      modRevision: 0,
      status: "ACTIVE",
      statusMessage: null,
      statusChangedAt: now,
      latest,
    };
    const change = this.#changed(definition.id, agent.number, "ADDED", timestamp);
    change.answers.push(stored);
    if (numbering !== undefined) change.content = numbering;
    return stored;
  }

  /**
   * insert() of the version #stage wrote without an agent (MySQL, a new agent): gives it its agent and document,
   * or leaves that numbering for the CALL that ends the transaction (see below).
   */
  async #completeStaged(context: WriteContext, row: NewRow, pending: Staged): Promise<Inserted> {
    const tenant = this.tenant.name;
    const { agent, definition, index, created } = row;
    const numbered = {
      numbered: { seq: pending.seq, agentNumber: agent.number },
      document: row.encoded.document,
      document_binary: row.encoded.binary,
    };
    // A new agent's only version, indexed as staged: nothing else is left to write, and its numbering goes
    // into the CALL that takes the revisions and commits, one round trip fewer while the tenant's sequence
    // row is held (migration 0015). Written now if the transaction goes on (#run).
    // Staged: #stage set the index its side rows were written from.
    if (created && sameIndex(index, pending.index!)) return { latest: true, numbering: numbered };
    await writeContent(context, tenant, definition.id, numbered);
    // The index was made from the staged definition; the agent's reference id is not indexed, so
    // this does not happen unless that changes.
    if (!sameIndex(index, pending.index!))
      this.#keepText(definition.id, await indexDefinition(context, tenant, definition.id, index));
    // Staged for a new agent that another writer created in the meantime (found under the sequence's
    // lock): its versions may have seqs above ours, and the latest flag goes to the newest.
    if (created) return { latest: true, numbering: undefined };
    await this.#lockAgent(context, agent.number);
    const latestBefore = await latestOfAgent(context, tenant, agent.number);
    const latestNow = await refreshLatest(context, tenant, agent.number);
    // A version of the other writer's that lost the flag to ours changed too (its meta.latest).
    for (const id of latestBefore)
      if (id !== definition.id && id !== latestNow) this.#changed(id, agent.number, "MODIFIED");
    return { latest: latestNow === definition.id, numbering: undefined };
  }

  /** insert() of a version not staged: its row and index, taking the latest flag from the agent's others. */
  async #insertRow(context: WriteContext, row: NewRow): Promise<void> {
    const tenant = this.tenant.name;
    const { key, agent, definition, timestamp } = row;
    // The new version is ACTIVE and the agent's newest, so it takes the latest flag from the
    // others; under the agent's lock, so that concurrent writers of the agent see each other.
    // A new agent has no others: its first version costs no statement more than before.
    if (!row.created) {
      await this.#lockAgent(context, agent.number);
      // Under the agent's lock the flag stays where it is until clearLatest moves it: the version that
      // loses it changes too (its meta.latest), and takes a revision of its own.
      for (const id of await latestOfAgent(context, tenant, agent.number)) this.#changed(id, agent.number, "MODIFIED");
      await clearLatest(context, tenant, agent.number);
    }
    const seq = await insertDefinition(context, {
      id: definition.id,
      tenant,
      name: key.name,
      provider_id: key.providerId,
      version: key.version,
      agent_number: agent.number,
      document: row.encoded.document,
      document_binary: row.encoded.binary,
      created_at: timestamp,
      updated_at: timestamp,
      status_changed_at: timestamp,
      is_latest: true,
    });
    this.#keepText(definition.id, await indexDefinition(context, tenant, definition.id, row.index, seq));
  }

  async update(
    existing: KeyedInstanceRef,
    definition: AgentDefinition,
    given?: DefinitionIndex,
  ): Promise<StoredDefinition> {
    if (existing.tenant !== this.tenant.name) {
      throw new Error(
        `update() was given an instance of tenant "${existing.tenant}" in a transaction on "${this.tenant.name}".`,
      );
    }
    if (definition.id !== existing.id) {
      // The id is the instance's identity and links versions: an update must never move it.
      throw new Error(`update() was given id "${definition.id}" for the existing instance "${existing.id}".`);
    }
    const { document, json, binary } = encodeDefinition(definition);
    /** The stored version as this update leaves it: the new encodings, its lifecycle otherwise as it was. */
    const answer = (updatedAt: Date, revision: number): Mutable<StoredDefinition> => ({
      ...lifecycleOf(existing),
      id: existing.id,
      tenant: existing.tenant,
      agent: existing.agent,
      json,
      binary,
      createdAt: existing.createdAt,
      updatedAt,
      revision,
    });
    // The same content again (an idempotent re-registration) is no change: no write, and the
    // revision, updatedAt and so the ETag stay, so the caches of readers stay valid.
    if (Buffer.compare(existing.binary, binary) === 0) {
      return answer(existing.updatedAt, existing.revision);
    }
    const now = new Date();
    const at = toDatabaseTimestamp(now);
    const index = given ?? (await indexOf(definition));
    this.#keepText(
      existing.id,
      await this.#run((context) => indexDefinition(context, existing.tenant, existing.id, index)),
    );
    // The row's UPDATE waits for the end of the transaction, where the revision is taken (on MySQL it goes into
    // the CALL that takes it), or goes before the next statement of this transaction, if one comes: #run.
    const change = this.#changed(existing.id, existing.agent.number, "MODIFIED", at);
    change.content = { document, document_binary: binary, updated_at: at };
    // Status, its message and time, and the latest flag stay: only content changed.
    const stored = answer(now, existing.revision + 1);
    change.answers.push(stored);
    return stored;
  }

  async setStatus(
    versions: readonly InstanceRef[],
    status: DefinitionStatus,
    statusMessage: string | null,
  ): Promise<StoredDefinition[]> {
    const [first] = versions;
    if (first === undefined) return [];
    const tenant = this.tenant.name;
    if (versions.some((v) => v.tenant !== tenant || v.agent.number !== first.agent.number)) {
      throw new Error(`setStatus() was given versions of more than one agent, or of another tenant than "${tenant}".`);
    }
    const at = toDatabaseTimestamp(new Date());
    return this.#run(async (context) => {
      // Agent, then versions: the order findVersionsForUpdate and insert lock in.
      await this.#lockAgent(context, first.agent.number);
      const agentNumber = first.agent.number;
      const latestBefore = await latestOfAgent(context, tenant, agentNumber);
      for (const version of versions) {
        await updateStatus(context, tenant, version.id, { status, status_message: statusMessage, at });
        this.#changed(version.id, agentNumber, "STATUS_CHANGED", at);
      }
      const latestNow = await refreshLatest(context, tenant, agentNumber);
      // The versions whose latest flag moved changed too (their meta.latest).
      for (const id of latestBefore) if (id !== latestNow) this.#changed(id, agentNumber, "MODIFIED", at);
      if (latestNow !== undefined && !latestBefore.includes(latestNow))
        this.#changed(latestNow, agentNumber, "MODIFIED", at);
      const stored: StoredDefinition[] = [];
      for (const version of versions) {
        const row = await readStoredInWrite(context, tenant, version.id);
        const definition = row === undefined ? undefined : toStoredDefinition(tenant, row);
        if (definition === undefined)
          throw new Error(`Agent definition ${version.id} vanished inside its own status change.`);
        const answer: Mutable<StoredDefinition> = { ...definition };
        this.#changes.get(version.id)?.answers.push(answer);
        stored.push(answer);
      }
      return stored;
    });
  }

  /** Locks the agent's row (queries.lockAgent) unless this transaction holds it already. */
  async #lockAgent(context: WriteContext, agentNumber: number): Promise<void> {
    if (this.#lockedAgents.has(agentNumber)) return;
    await lockAgent(context, this.tenant.name, agentNumber);
    this.#lockedAgents.add(agentNumber);
  }

  /**
   * Records that this transaction changed version `id` (once per version: a second change keeps the kind that
   * says most), and answers its record.
   */
  #changed(id: string, agentNumber: number, kind: ChangeKind, at = toDatabaseTimestamp(new Date())): PendingChange {
    const known = this.#changes.get(id);
    if (known !== undefined) {
      if (KIND_RANK[kind] > KIND_RANK[known.kind]) known.kind = kind;
      return known;
    }
    const change: PendingChange = { id, agentNumber, kind, at, answers: [] };
    this.#changes.set(id, change);
    return change;
  }

  /**
   * The statements to send with COMMIT: the tenant's revisions for the versions changed, their mod_revision,
   * their change records; undefined when nothing changed (no revision is taken).
   */
  lastStatements(): CommitWith | undefined {
    if (this.#changes.size === 0) return undefined;
    const changes = [...this.#changes.values()].map(
      ({ id, agentNumber, kind, at, content }): RevisionChange =>
        content === undefined ? { id, agentNumber, kind, at } : { id, agentNumber, kind, at, content },
    );
    return revisionStatements(this.#context.statements, this.tenant.name, changes);
  }

  /** After COMMIT: `last` was the last revision taken; each change's answers show the one it took. */
  settle(last: number): void {
    const changes = [...this.#changes.values()];
    changes.forEach((change, i) => {
      const revision = last - (changes.length - 1 - i);
      this.#revisions.set(change.id, revision);
      for (const answer of change.answers) answer.modRevision = revision;
    });
  }

  /**
   * After COMMIT (settle), on MySQL: the full-text texts to write (search-text.ts), each with the revision its
   * version took; none on SQLite, whose texts are written in the transaction.
   */
  textsToKeep(): KeptText[] {
    const texts: KeptText[] = [];
    for (const [id, text] of this.#texts) {
      const revision = this.#revisions.get(id);
      if (revision !== undefined) texts.push({ tenant: this.tenant.name, id, text, revision });
    }
    return texts;
  }

  #keepText(id: string, text: string | undefined): void {
    if (text !== undefined) this.#texts.set(id, text);
  }

  /** Rethrows the failure that doomed this attempt, if any. */
  throwIfFailed(): void {
    if (this.#failure !== undefined) throw this.#failure.error;
  }

  /**
   * Throws when an instance prepareInsert announced was never inserted: committing could store a row with
   * no agent.
   */
  throwIfIncomplete(): void {
    if (this.#pending !== undefined)
      throw new Error(`Instance ${this.#pending.definition.id} was announced by prepareInsert() and never inserted.`);
  }

  /** Called when the transaction is over; later calls fail loudly instead of running outside it. */
  end(): void {
    this.#ended = true;
  }

  async #run<T>(query: (context: WriteContext) => Promise<T>): Promise<T> {
    if (this.#ended) throw new Error("A WriteTransaction was used after its write() ended.");
    this.throwIfFailed();
    try {
      // A content UPDATE left for COMMIT is written first if the transaction goes on: what follows reads it.
      for (const change of this.#changes.values()) {
        if (change.content === undefined) continue;
        await writeContent(this.#context, this.tenant.name, change.id, change.content);
        change.content = undefined;
      }
      return await query(this.#context);
    } catch (error) {
      // A table's triggers broken on the node (run/broken-triggers.ts): the statement failed, and write()
      // reloads them and runs the work again, never going on from it.
      if (classifyDriverError(error) !== "other" || isBrokenTriggers(error)) this.#failure ??= { error };
      throw error;
    }
  }
}

/**
 * The new instance prepareInsert announced: its key, its definition (but for its reference id), its creation
 * time, its DefinitionIndex when the caller gave it, and once staged (MySQL, a new agent) its row's seq and the
 * index its side rows were written from.
 */
interface Pending {
  readonly key: UpsertKey;
  readonly definition: AgentDefinition;
  readonly at: Date;
  readonly seq: number | undefined;
  readonly index: DefinitionIndex | undefined;
}

/** A pending instance #stage has written (its seq set). */
type Staged = Pending & { readonly seq: number };

/** What insert() writes: the version, its agent, its encodings and index, and when. */
interface NewRow {
  readonly key: UpsertKey;
  readonly agent: AgentRef;
  readonly definition: AgentDefinition;
  readonly index: DefinitionIndex;
  /** Whether this transaction created the agent (it has no other versions). */
  readonly created: boolean;
  readonly timestamp: string;
  readonly encoded: ReturnType<typeof encodeDefinition>;
}

/** What insert()'s statements decided: whether the version is its agent's latest, and its numbering left for COMMIT. */
interface Inserted {
  readonly latest: boolean;
  /** The staged version's numbering, left for the CALL that ends the transaction (MySQL; see #completeStaged). */
  readonly numbering: RevisionContent | undefined;
}

/**
 * `definition`'s DefinitionIndex when the caller gave none (the service gives the one its admission made),
 * made a text at a time, giving the event loop back every SQLITE_SLICE_MS (issue 50).
 */
const indexOf = (definition: AgentDefinition): Promise<DefinitionIndex> =>
  inTurns(indexSteps(definition), SQLITE_SLICE_MS);

function assertNewInstanceId(id: string): void {
  if (!INSTANCE_ID.test(id))
    throw new Error(`A new instance was given "${id}" as its id; expected 32 lowercase hex characters.`);
}

/** The lifecycle members of an instance, as they are. */
function lifecycleOf(instance: InstanceRef): Lifecycle {
  return {
    revision: instance.revision,
    modRevision: instance.modRevision,
    status: instance.status,
    statusMessage: instance.statusMessage,
    statusChangedAt: instance.statusChangedAt,
    latest: instance.latest,
  };
}
