import { create, type DescMessage, fromBinary, type MessageShape } from "@bufbuild/protobuf";
import type { AgentCard } from "../../gen/asor/v1/agent_card_pb.js";
import { type AgentDefinition, AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import type {
  GetAgentBaseCardRequest,
  GetAgentCardRequest,
  GetAgentDefinitionRequest,
  GetAiCatalogRequest,
  ListAgentDefinitionsRequest,
  ListAgentDefinitionVersionsRequest,
  SetAgentDefinitionStatusRequest,
  UpdateAgentDefinitionRequest,
  UpsertAgentDefinitionRequest,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import {
  GetAgentBaseCardRequestSchema,
  GetAgentCardRequestSchema,
  GetAgentDefinitionRequestSchema,
  GetAiCatalogRequestSchema,
  ListAgentDefinitionsRequestSchema,
  ListAgentDefinitionVersionsRequestSchema,
  SetAgentDefinitionStatusRequestSchema,
  UpdateAgentDefinitionRequestSchema,
  UpsertAgentDefinitionRequestSchema,
} from "../../gen/asor/v1/agent_definition_service_pb.js";
import type { AiCatalog, AiCatalogEntry } from "../../gen/asor/v1/ai_catalog_pb.js";
import { agentCardEtag, renderAgentCard } from "../domain/agent-card.js";
import { aiCatalog, aiCatalogEntry } from "../domain/ai-catalog.js";
import { definitionRuleIssues, joinIssues } from "../domain/definition-issues.js";
import { cardDeactivated, type Issue, invalid, issueAt, notFound } from "../domain/errors.js";
import type { HostIdentity } from "../domain/host-platform.js";
import { checkIfMatch } from "../domain/lifecycle.js";
import {
  type ListQuery,
  listBinding,
  pagePosition,
  pageToken,
  parseListQuery,
  versionsBinding,
} from "../domain/list-query.js";
import { DEFINITION_STATUSES, type StoredDefinition } from "../domain/records.js";
import { DEFAULT_MAX_TERMS_PER_DEFINITION, type DefinitionIndex } from "../domain/search-terms.js";
import { idForm } from "../domain/upsert.js";
import { assertValid, contractIssues, unknownFieldIssues } from "../domain/validation.js";
import type { AgentDefinitionRepository, Found, ListResult, Page, Work } from "../storage/repository.js";
import type { CardSigner } from "./card-signer.js";
import { findInWrite, type Upserted, updateIn, upsertIn, type WriteAuthority } from "./definition-writes.js";
import { admitDefinitionWrite } from "./write-admission.js";
import type { WriteBudget } from "./write-budget.js";

export type { Upserted, WriteAuthority } from "./definition-writes.js";

export const DEFAULT_PAGE_SIZE = 20;

/** Every contract issue of a request: unknown binary fields and protovalidate rules, in one pass. */
function requestIssues<Desc extends DescMessage>(schema: Desc, request: MessageShape<Desc>): readonly Issue[] {
  return joinIssues(unknownFieldIssues(schema, request), contractIssues(schema, request));
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

/** A definition's A2A agent card, and the ETag of its HTTP answers. */
export interface AgentCardAnswer {
  readonly card: AgentCard;
  readonly etag: string;
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
  /** The A2A agent card of an agent's newest ACTIVE version (its A2A base URL's); NOT_FOUND when it has none. */
  baseCard(tenant: string, request: GetAgentBaseCardRequest): Promise<AgentCardAnswer>;
  /** The tenant's AI Catalog: an entry per agent with an ACTIVE version; `base` makes the URLs absolute. */
  aiCatalog(tenant: string, request: GetAiCatalogRequest, base: string, work?: Work): Promise<AiCatalog>;
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
  /** Signs every agent card served (issue 43); absent: cards go unsigned (a service made for a unit test). */
  readonly cardSigner?: CardSigner;
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
export function createRegistryService(options: RegistryServiceOptions): RegistryService {
  return new StoredRegistryService(options);
}

/** The registry service over a repository (createRegistryService). */
class StoredRegistryService implements RegistryService {
  readonly #repository: AgentDefinitionRepository;
  readonly #host: HostIdentity;
  readonly #maxTermsPerDefinition: number;
  readonly #writeBudget: WriteBudget | undefined;
  readonly #cardSigner: CardSigner | undefined;

  constructor({
    repository,
    host,
    maxTermsPerDefinition = DEFAULT_MAX_TERMS_PER_DEFINITION,
    writeBudget,
    cardSigner,
  }: RegistryServiceOptions) {
    this.#repository = repository;
    this.#host = host;
    this.#maxTermsPerDefinition = maxTermsPerDefinition;
    this.#writeBudget = writeBudget;
    this.#cardSigner = cardSigner;
  }

  async list(tenant: string, request: ListAgentDefinitionsRequest, work?: Work): Promise<DefinitionPage> {
    assertValid(requestIssues(ListAgentDefinitionsRequestSchema, request));
    const query = parseListQuery(tenant, { ...request, limit: request.limit ?? DEFAULT_PAGE_SIZE });
    const found = await this.#repository.search(tenant, query, work);
    return withNextToken(found, () => listBinding(tenant, query));
  }

  async get(tenant: string, request: GetAgentDefinitionRequest): Promise<ReadDefinition> {
    assertValid(requestIssues(GetAgentDefinitionRequestSchema, request));
    const { stored, revision } = await this.#readByAnyId(tenant, request.id);
    if (stored === undefined) throw notFound(`Agent definition "${request.id}"`, "id");
    return { stored, revision };
  }

  async listVersions(
    tenant: string,
    request: ListAgentDefinitionVersionsRequest,
    work?: Work,
  ): Promise<DefinitionPage> {
    assertValid(requestIssues(ListAgentDefinitionVersionsRequestSchema, request));
    const record = await this.#findByAnyId(tenant, request.id);
    if (record === undefined) throw notFound(`Agent "${request.id}"`, "id");
    const binding = () => versionsBinding(tenant, record.agent.number);
    const page = pageOf(request);
    const after = pagePosition(request, binding);
    return withNextToken(
      await this.#repository.listVersions(
        tenant,
        record.agent.number,
        after === undefined ? page : { ...page, after },
        work,
      ),
      binding,
    );
  }

  async agentCard(tenant: string, request: GetAgentCardRequest): Promise<AgentCardAnswer> {
    assertValid(requestIssues(GetAgentCardRequestSchema, request));
    const stored = await this.#findByAnyId(tenant, request.id);
    if (stored === undefined) throw notFound(`Agent definition "${request.id}"`, "id");
    // A withdrawn agent's card is not a usable card: clients and caches that had it learn it is gone.
    if (stored.status === "DEACTIVATED") throw cardDeactivated(stored.id);
    return this.#signedCard(tenant, stored);
  }

  /** The card of `stored`, with the registry's signature (issue 43), and its ETag. */
  async #signedCard(tenant: string, stored: StoredDefinition): Promise<AgentCardAnswer> {
    const card = renderAgentCard(fromBinary(AgentDefinitionSchema, stored.binary));
    const etag = agentCardEtag(stored);
    // Signed once per revision and key (the signer's cache): the ETag names the card's revision in its tenant.
    const signed = this.#cardSigner === undefined ? card : await this.#cardSigner.sign(`${tenant}\u0000${etag}`, card);
    return { card: signed, etag };
  }

  async baseCard(tenant: string, request: GetAgentBaseCardRequest): Promise<AgentCardAnswer> {
    assertValid(requestIssues(GetAgentBaseCardRequestSchema, request));
    const reference = request.agent.startsWith("Agent_ID=") ? request.agent : `Agent_ID=${request.agent}`;
    const newest = idForm(reference) === "reference" ? await this.#findByAnyId(tenant, reference) : undefined;
    if (newest === undefined) throw notFound(`Agent "${request.agent}"`, "agent");
    const active = newest.status === "ACTIVE" ? newest : await this.#newestActive(tenant, newest.agent.number);
    if (active === undefined) throw notFound(`An ACTIVE version of agent "${request.agent}"`, "agent");
    return this.#signedCard(tenant, active);
  }

  async aiCatalog(tenant: string, request: GetAiCatalogRequest, base: string, work?: Work): Promise<AiCatalog> {
    assertValid(requestIssues(GetAiCatalogRequestSchema, request));
    // Every ACTIVE version, a page at a time; each agent's entry from its newest (the highest creation), and the
    // latest change of any of its ACTIVE versions.
    const newest = new Map<number, StoredDefinition>();
    const changed = new Map<number, Date>();
    const query = parseListQuery(tenant, {
      ...create(ListAgentDefinitionsRequestSchema, { status: ["ACTIVE"] }),
      limit: 100,
    });
    let after: ListQuery["after"];
    do {
      const page: ListResult = await this.#repository.search(
        tenant,
        after === undefined ? query : { ...query, after },
        work,
      );
      for (const version of page.items) {
        const { number } = version.agent;
        const seen = newest.get(number);
        if (seen === undefined || version.createdAt > seen.createdAt) newest.set(number, version);
        if ((changed.get(number) ?? 0) < version.updatedAt) changed.set(number, version.updatedAt);
      }
      after = page.next;
    } while (after !== undefined);
    const entries: AiCatalogEntry[] = [...newest.values()]
      .sort((a, b) => a.agent.number - b.agent.number)
      .map((version) =>
        aiCatalogEntry(fromBinary(AgentDefinitionSchema, version.binary), {
          base,
          tenant,
          referenceId: version.agent.referenceId,
          updatedAt: changed.get(version.agent.number) ?? version.updatedAt,
        }),
      );
    return aiCatalog(base, entries);
  }

  /** The newest ACTIVE version of agent `agentNumber`, read a page of its versions (newest first) at a time. */
  async #newestActive(tenant: string, agentNumber: number): Promise<StoredDefinition | undefined> {
    let page: Page = { limit: 100, offset: 0 };
    for (;;) {
      const { items, next } = await this.#repository.listVersions(tenant, agentNumber, page);
      const active = items.find((version) => version.status === "ACTIVE");
      if (active !== undefined || next === undefined) return active;
      page = { limit: 100, offset: 0, after: next };
    }
  }

  async upsert(
    tenant: string,
    request: UpsertAgentDefinitionRequest,
    authority: WriteAuthority = LEAST_AUTHORITY,
  ): Promise<Upserted> {
    const def = this.#validDefinition(UpsertAgentDefinitionRequestSchema, request);
    // Last, on a definition valid otherwise: a term is a row the write inserts, and the bound keeps a write's
    // work (its transaction's statements, their memory) in proportion to what an ordinary definition needs.
    return this.#admitted(def, (index) =>
      this.#repository.write(tenant, (tx) => upsertIn(tx, def, index, request, authority)),
    );
  }

  async update(
    tenant: string,
    request: UpdateAgentDefinitionRequest,
    { mayReactivate }: WriteAuthority = LEAST_AUTHORITY,
  ): Promise<StoredDefinition> {
    const def = this.#validDefinition(UpdateAgentDefinitionRequestSchema, request);
    return this.#admitted(def, (index) =>
      this.#repository.write(tenant, (tx) => updateIn(tx, request, def, index, mayReactivate)),
    );
  }

  async setStatus(tenant: string, request: SetAgentDefinitionStatusRequest): Promise<StatusSet> {
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
    return this.#repository.write(tenant, async (tx) => {
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
  }

  /**
   * Runs `write` once `def` is admitted (write-admission.ts), with `def`'s search index, which its versions
   * stored share (withDerivedFields changes no text or filter value); gives its share of the budget back after.
   */
  async #admitted<T>(def: AgentDefinition, write: (index: DefinitionIndex) => Promise<T>): Promise<T> {
    const { index, release } = await admitDefinitionWrite(def, this.#maxTermsPerDefinition, this.#writeBudget);
    try {
      return await write(index);
    } finally {
      release();
    }
  }

  /** The version an id names: the 32-hex id of a version, or `Agent_ID=...` for the agent's newest version. */
  async #findByAnyId(tenant: string, id: string): Promise<StoredDefinition | undefined> {
    return (await this.#readByAnyId(tenant, id)).stored;
  }

  /** #findByAnyId, with the tenant revision the read was made at. */
  #readByAnyId(tenant: string, id: string): Promise<Found> {
    // Not an id we could have issued: find finds nothing in one round trip, and says so of an unknown tenant.
    return idForm(id) === "reference"
      ? this.#repository.findNewestByReference(tenant, id)
      : this.#repository.find(tenant, id);
  }

  /**
   * A PUT's or POST's definition, checked as a whole (its request's rules, its identifying text, then across
   * fields, then the host platform rule).
   */
  #validDefinition<Desc extends DescMessage>(
    schema: Desc,
    request: MessageShape<Desc> & { readonly agentCardAndTools?: AgentDefinition },
  ): AgentDefinition {
    const def = request.agentCardAndTools;
    const issues = requestIssues(schema, request);
    assertValid(def ? joinIssues(issues, definitionRuleIssues(def, this.#host)) : issues);
    if (def === undefined) throw new Error("unreachable: a missing definition is a validation issue");
    return def;
  }
}
