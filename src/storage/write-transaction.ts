/**
 * The WriteTransaction the repository hands to `write`'s work
 * (sql-repository.ts): each call is one or two statements of queries/writes.ts
 * on the transaction's connection, and the first race or lost connection
 * dooms the attempt, which the repository then runs again or reports.
 */

import { Buffer } from "node:buffer";
import type { AgentDefinition } from "../../gen/asor/v1/agent_definition_pb.js";
import type { LivenessDecision } from "../domain/liveness.js";
import type { DefinitionIndex } from "../domain/search-terms.js";
import { INSTANCE_ID } from "../domain/upsert.js";
import { indexDefinition } from "./queries/search-index.js";
import type { WriteContext } from "./queries/writes.js";
import {
  findAgentByNameForUpdate,
  findByKeyForUpdate,
  findExternalIdOwnerForUpdate,
  findInstanceById,
  findInstanceByIdForUpdate,
  findInstancesOfAgentForUpdate,
  findNewestInstanceByReference,
  insertAgent,
  insertExternalId,
  lockAgent,
  lockSequenceAndFindAgent,
  newestLiveOfAgent,
  takeAgentNumber,
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
  lifecycleOf,
  toAgentRef,
  toDatabaseTimestamp,
  toInstanceRef,
} from "./rows.js";
import { classifyDriverError, isBrokenTriggers } from "./run/driver-errors.js";
import type { CommitWith } from "./run/writes.js";
import type { KeptText } from "./search-text.js";
import { type Mutable, WriteChanges, type WriteSteps } from "./write-changes.js";
import {
  assertNewInstanceId,
  completeStaged,
  type Inserted,
  indexOf,
  insertRow,
  type NewVersion,
  type Pending,
  type Staged,
  stageRow,
} from "./write-insert.js";
import { setLivenessIn } from "./write-liveness.js";
import { setStatusIn } from "./write-status.js";

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
  /** The versions changed so far, in order, and the texts kept of them (WriteChanges). */
  readonly #changes = new WriteChanges();
  /** What the steps of insert() and setStatus() (write-insert.ts, write-status.ts) use of this transaction. */
  readonly #steps: WriteSteps;

  constructor(context: WriteContext, tenant: WriteTenant) {
    this.#context = context;
    this.tenant = tenant;
    this.#steps = {
      tenant: tenant.name,
      changes: this.#changes,
      lockAgent: (context, agentNumber) => this.#lockAgent(context, agentNumber),
    };
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
        this.#pending = await stageRow(context, this.#steps, pending);
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
   * Remembers the new instance insert() will store (repository.ts says why). On MySQL, when findAgentByName then
   * finds no agent, the row is staged there with no agent and its search index written, before the sequence is
   * locked (write-insert.ts's stageRow); insert() completes it in one UPDATE. No reader sees the staged row, and a
   * work that never calls insert() is refused (throwIfIncomplete). A new version of an agent that exists is written
   * by insert() under the agent's lock: its seq must follow the versions already there (latest = newest by seq).
   */
  async prepareInsert(key: UpsertKey, definition: AgentDefinition, index?: DefinitionIndex): Promise<void> {
    if (this.#pending !== undefined) throw new Error("prepareInsert() was called twice in one write.");
    assertNewInstanceId(definition.id);
    this.#pending = { key, definition, at: new Date(), seq: undefined, index };
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
    const row: NewVersion = { key, agent, definition, index, created, timestamp, encoded };
    const { latest, numbering } = await this.#run(async (context): Promise<Inserted> => {
      this.#pending = undefined;
      if (pending?.seq !== undefined) return completeStaged(context, this.#steps, row, pending as Staged);
      await insertRow(context, this.#steps, row);
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
    const change = this.#changes.changed(definition.id, agent.number, "ADDED", timestamp);
    change.answers.push(stored);
    if (numbering !== undefined) change.content = numbering;
    return stored;
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
    this.#changes.keepText(
      existing.id,
      await this.#run((context) => indexDefinition(context, existing.tenant, existing.id, index)),
    );
    // The row's UPDATE waits for the end of the transaction, where the revision is taken (on MySQL it goes into
    // the CALL that takes it), or goes before the next statement of this transaction, if one comes: #run.
    const change = this.#changes.changed(existing.id, existing.agent.number, "MODIFIED", at);
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
    return this.#run((context) =>
      setStatusIn(context, this.#steps, versions, first.agent.number, { status, status_message: statusMessage, at }),
    );
  }

  setLiveness(version: InstanceRef, decide: LivenessDecision): Promise<StoredDefinition | undefined> {
    if (version.tenant !== this.tenant.name)
      throw new Error(`setLiveness() was given a version of tenant "${version.tenant}", not "${this.tenant.name}".`);
    return this.#run((context) => setLivenessIn(context, this.#steps, version, decide));
  }

  /** Locks the agent's row (queries.lockAgent) unless this transaction holds it already. */
  async #lockAgent(context: WriteContext, agentNumber: number): Promise<void> {
    if (this.#lockedAgents.has(agentNumber)) return;
    await lockAgent(context, this.tenant.name, agentNumber);
    this.#lockedAgents.add(agentNumber);
  }

  /**
   * The statements to send with COMMIT: the tenant's revisions for the versions changed, their mod_revision,
   * their change records; undefined when nothing changed (no revision is taken).
   */
  lastStatements(): CommitWith | undefined {
    return this.#changes.lastStatements(this.#context.statements, this.tenant.name);
  }

  /** After COMMIT: `last` was the last revision taken; each change's answers show the one it took. */
  settle(last: number): void {
    this.#changes.settle(last);
  }

  /** After COMMIT (settle), on MySQL: the full-text texts to write (search-text.ts); none on SQLite. */
  textsToKeep(): KeptText[] {
    return this.#changes.textsToKeep(this.tenant.name);
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
      await this.#changes.writeLeftContent(this.#context, this.tenant.name);
      return await query(this.#context);
    } catch (error) {
      // A table's triggers broken on the node (run/broken-triggers.ts): the statement failed, and write()
      // reloads them and runs the work again, never going on from it.
      if (classifyDriverError(error) !== "other" || isBrokenTriggers(error)) this.#failure ??= { error };
      throw error;
    }
  }
}
