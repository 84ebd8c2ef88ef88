/**
 * Provider keys (issue 43, item 2): a tenant's admin sets, reads and revokes the public keys of a provider, the
 * trust roots its submissions' signatures are verified against. Nothing else makes a key: never a signature's
 * `jku`, `x5u`, `jwk` or `x5c` header, never a submission.
 */
import { create, fromJsonString } from "@bufbuild/protobuf";
import { timestampFromDate } from "@bufbuild/protobuf/wkt";
import {
  type GetProviderKeysRequest,
  GetProviderKeysRequestSchema,
  JsonWebKeySchema,
  ProviderKeyRecordSchema,
  type ProviderKeys,
  ProviderKeysSchema,
  type RevokeProviderKeyRequest,
  RevokeProviderKeyRequestSchema,
  type SetProviderKeysRequest,
  SetProviderKeysRequestSchema,
} from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { invalid, RegistryError } from "../domain/errors.js";
import { checkProviderKeys, MAX_PROVIDER_KEYS } from "../domain/jwks.js";
import type { ProviderKey } from "../domain/tenant-admin.js";
import { assertValid, contractIssues, unknownFieldIssues } from "../domain/validation.js";
import type { AgentDefinitionRepository } from "../storage/repository.js";

export interface ProviderKeyService {
  /** Makes the request's keys the provider's active set (the others revoked); answers the provider's keys. */
  set(request: SetProviderKeysRequest): Promise<ProviderKeys>;
  get(request: GetProviderKeysRequest): Promise<ProviderKeys>;
  /** Revokes one key; answers the provider's keys. */
  revoke(request: RevokeProviderKeyRequest): Promise<ProviderKeys>;
}

export function createProviderKeyService(repository: AgentDefinitionRepository): ProviderKeyService {
  const admin = repository.tenantAdmin();
  return {
    async set(request) {
      const issues = [
        ...unknownFieldIssues(SetProviderKeysRequestSchema, request),
        ...contractIssues(SetProviderKeysRequestSchema, request),
      ];
      // The keys' own rules beside the contract's, while the set is within its bound (each key is imported).
      const keys = request.jwks?.keys ?? [];
      const checked = keys.length <= MAX_PROVIDER_KEYS ? await checkProviderKeys(keys, "jwks.keys") : undefined;
      if (checked?.issues !== undefined) issues.push(...checked.issues);
      if (issues.length > 0 || checked === undefined || checked.issues !== undefined) throw invalid(issues);
      const change = await admin
        .setProviderKeys(request.tenant, request.providerId, checked.keys)
        .catch((error: unknown) => {
          throw underJwks(error);
        });
      return keysMessage(request.tenant, request.providerId, change.keys);
    },
    async get(request) {
      assertValid([
        ...unknownFieldIssues(GetProviderKeysRequestSchema, request),
        ...contractIssues(GetProviderKeysRequestSchema, request),
      ]);
      return keysMessage(
        request.tenant,
        request.providerId,
        await admin.providerKeys(request.tenant, request.providerId),
      );
    },
    async revoke(request) {
      assertValid([
        ...unknownFieldIssues(RevokeProviderKeyRequestSchema, request),
        ...contractIssues(RevokeProviderKeyRequestSchema, request),
      ]);
      const change = await admin.revokeProviderKey(request.tenant, request.providerId, request.kid);
      return keysMessage(request.tenant, request.providerId, change.keys);
    },
  };
}

/**
 * A refusal of the store, whose issues name the keys' places in the set (`keys[1].kid`, their messages opening
 * with the path), with the paths of the request (`jwks.keys[1].kid`), as every issue of the service gives them.
 */
function underJwks(error: unknown): unknown {
  if (!(error instanceof RegistryError) || error.code !== "VALIDATION_FAILED") return error;
  return invalid(
    error.issues.map((issue) =>
      issue.path === undefined ? issue : { ...issue, path: `jwks.${issue.path}`, message: `jwks.${issue.message}` },
    ),
  );
}

/** The answer: the active keys as a JWKS, and the record of every key. */
function keysMessage(tenant: string, providerId: string, keys: readonly ProviderKey[]): ProviderKeys {
  return create(ProviderKeysSchema, {
    tenant,
    providerId,
    keys: keys.filter((key) => key.revokedAt === null).map((key) => fromJsonString(JsonWebKeySchema, key.jwk)),
    records: keys.map((key) =>
      create(ProviderKeyRecordSchema, {
        kid: key.kid,
        alg: key.alg,
        createTime: timestampFromDate(key.createdAt),
        ...(key.revokedAt === null ? {} : { revokeTime: timestampFromDate(key.revokedAt) }),
      }),
    ),
  });
}
