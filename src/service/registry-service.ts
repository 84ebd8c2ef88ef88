import { type DescMessage, fromBinary, type MessageShape } from "@bufbuild/protobuf";
import type { AgentCard } from "../../gen/asor/v1/agent_card_pb.js";
import { type AgentDefinition, AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import type {
  GetAgentCardRequest,
  GetAgentDefinitionRequest,
  ListAgentDefinitionsRequest,
  ListAgentDefinitionVersionsRequest,
  SetAgentDefinitionStatusRequest,
  UpdateAgentDefinitionRequest,
  UpsertAgentDefinitionRequest,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import {
  GetAgentCardRequestSchema,
  GetAgentDefinitionRequestSchema,
  ListAgentDefinitionsRequestSchema,
  ListAgentDefinitionVersionsRequestSchema,
  SetAgentDefinitionStatusRequestSchema,
  UpdateAgentDefinitionRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import { agentCardEtag, renderAgentCard } from "../domain/agent-card.js";
import { withDerivedFields } from "../domain/derived-fields.js";
import { cardDeactivated, type Issue, invalid, issueAt, notFound } from "../domain/errors.js";
import { type HostIdentity, hostPlatformIssues } from "../domain/host-platform.js";
import { identifyingTextIssues } from "../domain/identifying-text.js";
import { checkCreateOnly, checkIfMatch, checkKeyKept } from "../domain/lifecycle.js";
import { listBinding, pagePosition, pageToken, parseListQuery, versionsBinding } from "../domain/list-query.js";
import { type AgentRef, DEFINITION_STATUSES, type StoredDefinition } from "../domain/records.js";
import { DEFAULT_MAX_TERMS_PER_DEFINITION, type DefinitionIndex } from "../domain/search-terms.js";
import {
  idForm,
  newDefinitionId,
  noSequenceGenerator,
  planUpsert,
  type UpsertFacts,
  upsertKey,
} from "../domain/upsert.js";
import { assertValid, contractIssues, crossFieldIssues, unknownFieldIssues } from "../domain/validation.js";
import type {
  AgentDefinitionRepository,
  Found,
  ListResult,
  Page,
  Work,
  WriteTransaction,
} from "../storage/repository.js";
import { admitDefinitionWrite } from "./write-admission.js";
import type { WriteBudget } from "./write-budget.js";

export const DEFAULT_PAGE_SIZE = 20;

/** Every contract issue of a request: unknown binary fields and protovalidate rules, in one pass. */
function requestIssues<Desc extends DescMessage>(schema: Desc, request: MessageShape<Desc>): readonly Issue[] {
  return joinIssues(unknownFieldIssues(schema, request), contractIssues(schema, request));
}

/** Both lists as one; the empty list is the shared one when both are (a valid request allocates no list). */
function joinIssues(a: readonly Issue[], b: readonly Issue[]): readonly Issue[] {
  return a.length === 0 ? b : b.length === 0 ? a : [...a, ...b];
}

/** A page of stored definitions, ready to answer. */
export interface DefinitionPage {
  readonly total: number;
  readonly data: readonly StoredDefinition[];
  /** The tenant revision the page was read at (lists; a status change's page has none). */
  readonly revision?: number;
  /** Where the next page starts (`pageToken`); absent on the last page. */
  readonly nextPageToken?: string;
}

/** A definition a get found, and the tenant revision the read was made at. */
export interface ReadDefinition {
  readonly stored: StoredDefinition;
  readonly revision: number;
}

/** What an upsert stored, and whether it created the instance. */
export interface Upserted {
  readonly stored: StoredDefinition;
  readonly created: boolean;
}

/** A definition's A2A agent card, and the ETag of its HTTP answers. */
export interface AgentCardAnswer {
  readonly card: AgentCard;
  readonly etag: string;
}

/**
 * What the caller of a write may do beyond the write itself, as its operation
 * read it from the caller's token. Absent: the least (a caller that may not reactivate).
 */
export interface WriteAuthority {
  /**
   * May change DEACTIVATED versions and add versions to an agent whose versions all are (Setup: Agents, the
   * domain of PATCH .../status).
   */
  readonly mayReactivate: boolean;
}

const LEAST_AUTHORITY: WriteAuthority = { mayReactivate: false };

/** The registry's operations, independent of any transport. Tenants are resolved by the caller. */
export interface RegistryService {
  /** `work`: the request's signal; the search stops when it aborts (Work). */
  list(tenant: string, request: ListAgentDefinitionsRequest, work?: Work): Promise<DefinitionPage>;
  get(tenant: string, request: GetAgentDefinitionRequest): Promise<ReadDefinition>;
  listVersions(tenant: string, request: ListAgentDefinitionVersionsRequest, work?: Work): Promise<DefinitionPage>;
  /**
   * The A2A agent card of the version GET reads for the same id; 410 CARD_DEACTIVATED when that version is
   * DEACTIVATED.
   */
  agentCard(tenant: string, request: GetAgentCardRequest): Promise<AgentCardAnswer>;
  upsert(tenant: string, request: UpsertAgentDefinitionRequest, authority?: WriteAuthority): Promise<Upserted>;
  /** PUT: replaces the content of one version, by its id (KEY_CHANGED when the key would change). */
  update(tenant: string, request: UpdateAgentDefinitionRequest, authority?: WriteAuthority): Promise<StoredDefinition>;
  /** PATCH .../status: the versions set, newest first; `one` when the request named a single version by its id. */
  setStatus(tenant: string, request: SetAgentDefinitionStatusRequest): Promise<StatusSet>;
}

/** What a status change set. */
export interface StatusSet extends DefinitionPage {
  /** True when the request named one version by its id (REST answers it alone); false for an `Agent_ID=...`. */
  readonly one: boolean;
}

export interface RegistryServiceOptions {
  readonly repository: AgentDefinitionRepository;
  /** The host system's provider and platform ids, for A161. */
  readonly host: HostIdentity;
  /** MAX_TERMS_PER_DEFINITION (default DEFAULT_MAX_TERMS_PER_DEFINITION). */
  readonly maxTermsPerDefinition?: number;
  /** MAX_BUFFERED_WRITE_BYTES; absent: writes are not held back. */
  readonly writeBudget?: WriteBudget;
}

const pageOf = (request: { limit?: number; offset?: number }): Page => ({
  limit: request.limit ?? DEFAULT_PAGE_SIZE,
  offset: request.offset ?? 0,
});
/** The page, with the token of the next one when there is one. */
const withNextToken = ({ total, items, next, revision }: ListResult, binding: () => string): DefinitionPage =>
  next === undefined
    ? { total, data: items, revision }
    : { total, data: items, revision, nextPageToken: pageToken(binding(), next) };

/**
 * Validation happens before any transaction is opened: a transaction holds a
 * pooled connection and row locks, and must not wait on work that needs
 * neither. Inside it the upsert reads what it decides on under lock, decides
 * with a pure function (planUpsert), and writes.
 */
export function createRegistryService({
  repository,
  host,
  maxTermsPerDefinition = DEFAULT_MAX_TERMS_PER_DEFINITION,
  writeBudget,
}: RegistryServiceOptions): RegistryService {
  /**
   * Runs `write` once `def` is admitted (write-admission.ts), with `def`'s search index, which its versions
   * stored share (withDerivedFields changes no text or filter value); gives its share of the budget back after.
   */
  const admitted = async <T>(def: AgentDefinition, write: (index: DefinitionIndex) => Promise<T>): Promise<T> => {
    const { index, release } = await admitDefinitionWrite(def, maxTermsPerDefinition, writeBudget);
    try {
      return await write(index);
    } finally {
      release();
    }
  };
  /** The version an id names: the 32-hex id of a version, or `Agent_ID=...` for the agent's newest version. */
  const findByAnyId = async (tenant: string, id: string): Promise<StoredDefinition | undefined> =>
    (await readByAnyId(tenant, id)).stored;
  /** findByAnyId, with the tenant revision the read was made at. */
  const readByAnyId = (tenant: string, id: string): Promise<Found> =>
    // Not an id we could have issued: find finds nothing in one round trip, and says so of an unknown tenant.
    idForm(id) === "reference" ? repository.findNewestByReference(tenant, id) : repository.find(tenant, id);

  /** The version an id names inside a write, as findByAnyId outside one; undefined for a form we never issue. */
  const findInWrite = (tx: WriteTransaction, id: string) => {
    const form = idForm(id);
    return form === "instance"
      ? tx.findById(id)
      : form === "reference"
        ? tx.findNewestByReference(id)
        : Promise.resolve(undefined);
  };

  const linkedAgent = async (tx: WriteTransaction, id: string): Promise<AgentRef | "unknown"> =>
    (await findInWrite(tx, id))?.agent ?? "unknown";

  /**
   * A PUT's or POST's definition, checked as a whole (its request's rules, its identifying text, then across
   * fields, then the host platform rule).
   */
  const validDefinition = <Desc extends DescMessage>(
    schema: Desc,
    request: MessageShape<Desc> & { readonly agentCardAndTools?: AgentDefinition },
  ): AgentDefinition => {
    const def = request.agentCardAndTools;
    const issues = requestIssues(schema, request);
    assertValid(
      def
        ? joinIssues(
            joinIssues(joinIssues(issues, identifyingTextIssues(def)), crossFieldIssues(def)),
            hostPlatformIssues(def, host),
          )
        : issues,
    );
    if (def === undefined) throw new Error("unreachable: a missing definition is a validation issue");
    return def;
  };

  const upsertIn = async (
    tx: WriteTransaction,
    def: AgentDefinition,
    index: DefinitionIndex,
    conditions: Pick<UpsertAgentDefinitionRequest, "etag" | "createOnly">,
    { mayReactivate }: WriteAuthority,
  ): Promise<Upserted> => {
    if (tx.tenant.sequencePrefix === null) throw noSequenceGenerator(tx.tenant.name);
    const key = upsertKey(def);
    const existing = await tx.findByKey(key);
    // The conditions hold on the key's instance as locked here, so nothing can change it before we write.
    checkIfMatch(conditions.etag, existing, "this name, provider and version");
    checkCreateOnly(conditions.createOnly, existing);
    const linked = def.id === "" ? undefined : await linkedAgent(tx, def.id);
    // Announced before its agent is looked up: for a new agent, its row and search index are written
    // before the tenant's sequence is locked (WriteTransaction.prepareInsert), so that work no longer
    // holds up the tenant's other creators of agents.
    const newId = existing === undefined && linked !== "unknown" ? newDefinitionId() : undefined;
    if (newId !== undefined) await tx.prepareInsert(key, withDerivedFields(def, newId, ""), index);
    const agentByName =
      existing === undefined && linked === undefined ? await tx.findAgentByName(key.providerId, key.name) : undefined;
    const externalAgentId = def.externalAgentId || undefined;
    // The agent a new version would join, read under its lock; only a caller that may not reactivate is refused by it.
    const joins = existing === undefined && linked !== "unknown" ? (linked ?? agentByName) : undefined;
    const facts: UpsertFacts = {
      existingAgent: existing?.agent,
      linkedAgent: linked,
      agentByName,
      externalAgentId,
      externalIdOwner:
        externalAgentId === undefined ? undefined : await tx.findExternalIdOwner(key.providerId, externalAgentId),
      existingDeactivated: existing?.status === "DEACTIVATED",
      agentDeactivated: !mayReactivate && joins !== undefined && (await tx.isAgentDeactivated(joins)),
      mayReactivate,
    };
    const plan = planUpsert(facts);
    const agent = plan.agent === "new" ? await tx.createAgent(key.providerId, key.name) : plan.agent;
    if (plan.claimExternalId && externalAgentId !== undefined)
      await tx.claimExternalId(key.providerId, externalAgentId, agent.number);
    if (existing !== undefined) {
      return {
        stored: await tx.update(existing, withDerivedFields(def, existing.id, agent.referenceId), index),
        created: false,
      };
    }
    return {
      stored: await tx.insert(key, agent, withDerivedFields(def, newId ?? newDefinitionId(), agent.referenceId), index),
      created: true,
    };
  };

  return {
    async list(tenant, request, work) {
      assertValid(requestIssues(ListAgentDefinitionsRequestSchema, request));
      const query = parseListQuery(tenant, { ...request, limit: request.limit ?? DEFAULT_PAGE_SIZE });
      const found = await repository.search(tenant, query, work);
      return withNextToken(found, () => listBinding(tenant, query));
    },

    async get(tenant, request) {
      assertValid(requestIssues(GetAgentDefinitionRequestSchema, request));
      const { stored, revision } = await readByAnyId(tenant, request.id);
      if (stored === undefined) throw notFound(`Agent definition "${request.id}"`, "id");
      return { stored, revision };
    },

    async listVersions(tenant, request, work) {
      assertValid(requestIssues(ListAgentDefinitionVersionsRequestSchema, request));
      const record = await findByAnyId(tenant, request.id);
      if (record === undefined) throw notFound(`Agent "${request.id}"`, "id");
      const binding = () => versionsBinding(tenant, record.agent.number);
      const page = pageOf(request);
      const after = pagePosition(request, binding);
      return withNextToken(
        await repository.listVersions(
          tenant,
          record.agent.number,
          after === undefined ? page : { ...page, after },
          work,
        ),
        binding,
      );
    },

    async agentCard(tenant, request) {
      assertValid(requestIssues(GetAgentCardRequestSchema, request));
      const stored = await findByAnyId(tenant, request.id);
      if (stored === undefined) throw notFound(`Agent definition "${request.id}"`, "id");
      // A withdrawn agent's card is not a usable card: clients and caches that had it learn it is gone.
      if (stored.status === "DEACTIVATED") throw cardDeactivated(stored.id);
      return { card: renderAgentCard(fromBinary(AgentDefinitionSchema, stored.binary)), etag: agentCardEtag(stored) };
    },

    async upsert(tenant, request, authority = LEAST_AUTHORITY) {
      const def = validDefinition(UpsertAgentDefinitionRequestSchema, request);
      // Last, on a definition valid otherwise: a term is a row the write inserts, and the bound keeps a write's
      // work (its transaction's statements, their memory) in proportion to what an ordinary definition needs.
      return admitted(def, (index) => repository.write(tenant, (tx) => upsertIn(tx, def, index, request, authority)));
    },

    async update(tenant, request, { mayReactivate } = LEAST_AUTHORITY) {
      const def = validDefinition(UpdateAgentDefinitionRequestSchema, request);
      return admitted(def, (index) =>
        repository.write(tenant, async (tx) => {
          const existing = await tx.findByIdForUpdate(request.id);
          if (existing === undefined) throw notFound(`Agent definition "${request.id}"`, "id");
          checkIfMatch(request.etag, existing, `Agent definition ${existing.id}`);
          checkKeyKept(upsertKey(def), existing.key);
          // The externalAgentID rules are the upsert's: the version keeps its agent.
          const externalAgentId = def.externalAgentId || undefined;
          const owner =
            externalAgentId === undefined
              ? undefined
              : await tx.findExternalIdOwner(existing.key.providerId, externalAgentId);
          const plan = planUpsert({
            existingAgent: existing.agent,
            linkedAgent: undefined,
            agentByName: undefined,
            externalAgentId,
            externalIdOwner: owner,
            existingDeactivated: existing.status === "DEACTIVATED",
            agentDeactivated: false,
            mayReactivate,
          });
          if (plan.claimExternalId && externalAgentId !== undefined)
            await tx.claimExternalId(existing.key.providerId, externalAgentId, existing.agent.number);
          return tx.update(existing, withDerivedFields(def, existing.id, existing.agent.referenceId), index);
        }),
      );
    },

    async setStatus(tenant, request) {
      assertValid(requestIssues(SetAgentDefinitionStatusRequestSchema, request));
      const change = request.statusChange;
      const status = change === undefined ? undefined : DEFINITION_STATUSES[change.status - 1];
      if (status === undefined)
        throw invalid([issueAt("status", "REQUIRED", "status is required: ACTIVE, DEPRECATED or DEACTIVATED.")]);
      const form = idForm(request.id);
      if (form === "reference" && request.etag !== "") {
        throw invalid([
          issueAt(
            "etag",
            "INVALID_VALUE",
            "If-Match (etag) names one version's revision; it cannot apply to every version of an agent. Use a " +
              "version's id.",
          ),
        ]);
      }
      const message = change?.statusMessage ?? null;
      return repository.write(tenant, async (tx) => {
        const named = await findInWrite(tx, request.id);
        if (named === undefined)
          throw notFound(form === "reference" ? `Agent "${request.id}"` : `Agent definition "${request.id}"`, "id");
        // The agent first, then its versions, locked: the order every writer of its latest flag takes.
        const versions = await tx.findVersionsForUpdate(named.agent);
        const chosen = form === "instance" ? versions.filter((v) => v.id === request.id) : versions;
        if (form === "instance") checkIfMatch(request.etag, chosen[0], `Agent definition ${request.id}`);
        const data = await tx.setStatus(chosen, status, message);
        return { total: data.length, data, one: form === "instance" };
      });
    },
  };
}
