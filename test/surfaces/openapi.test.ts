import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { fromJson } from "@bufbuild/protobuf";
import { Validator } from "@seriousme/openapi-schema-validator";
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { AgentDefinitionService, StatusChangeSchema } from "../../gen/asor/v1/agent_definition_service_pb.js";
import { TenantAdminService } from "../../gen/asor/v1/tenant_admin_service_pb.js";
import { parseConfig } from "../../src/config.js";
import { type ListRequestParts, parseListQuery } from "../../src/domain/list-query.js";
import { contractIssues } from "../../src/domain/validation.js";
import { formatOpenApiDocument } from "../../src/surfaces/rest/openapi/openapi-document.js";
import { REQUEST_LINE_BUDGET } from "../../src/surfaces/rest/openapi/query-parameters.js";
import { registryOpenApiDocument } from "../../src/surfaces/rest/openapi/registry-openapi.js";
import { buildRouteTable } from "../../src/surfaces/rest/route-table.js";
import { exampleDefinition } from "../support/definitions.js";
import { listRequestParts } from "../support/list-request-parts.js";
import { committedOpenApi, createOpenApiChecker, longestRequestLine, WIDEST_CHARACTER } from "../support/openapi.js";

const run = promisify(execFile);

/** A descriptor image of proto/asor as it is now, built the way `npm run generate` builds gen/asor.binpb. */
async function imageOfCurrentProto(): Promise<Uint8Array> {
  await run("node", [
    "--input-type=module",
    "-e",
    'import { writeProtoDeps } from "./scripts/proto-deps.mjs"; writeProtoDeps(".proto-deps");',
  ]);
  const dir = await mkdtemp(join(tmpdir(), "asor-openapi-"));
  try {
    await run("node", ["scripts/buf.mjs", "build", ".", "--path", "proto/asor", "--output", join(dir, "asor.binpb")]);
    return await readFile(join(dir, "asor.binpb"));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

const document = committedOpenApi();
const checker = createOpenApiChecker(document);
const schemas = document.components.schemas;

describe("gen/openapi.json", () => {
  it("is what the generator makes from the current proto (run npm run generate when this fails)", async () => {
    const generated = formatOpenApiDocument(
      registryOpenApiDocument(await imageOfCurrentProto(), parseConfig({}).adminDomain),
    );
    const committed = await readFile("gen/openapi.json", "utf8");
    expect(JSON.parse(generated)).toEqual(JSON.parse(committed));
    expect(generated).toBe(committed);
  });

  it("is a valid OpenAPI 3.1 document, by a validator that does refuse a broken one", async () => {
    expect(await new Validator().validate(structuredClone(document))).toEqual({ valid: true });
    const broken = structuredClone(document);
    delete broken.paths["/asor/v1/agentDefinition"].get.responses["200"].description;
    expect((await new Validator().validate(broken)).valid).toBe(false);
  });

  it("has an operation for every route the REST handler serves, and no other", () => {
    const served = buildRouteTable([AgentDefinitionService, TenantAdminService]).map((r) => `${r.verb} ${r.template}`);
    const documented = Object.entries(document.paths).flatMap(([path, item]: [string, any]) =>
      Object.keys(item).map((m) => `${m.toUpperCase()} ${path}`),
    );
    expect(documented.sort()).toEqual(served.sort());
    expect(documented).toContain("GET /api/asor/v1/{tenant}/agentDefinition/{id}/versions");
    expect(documented).toContain("POST /asor/v1/admin/tenants");
  });
});

describe("the definition's schema", () => {
  const agent = schemas.AgentDefinition;

  it("uses the contract's exact JSON names", () => {
    expect(Object.keys(agent.properties)).toEqual(
      expect.arrayContaining(["hostConfig", "externalAgentID", "externalTenantID", "iconUrl", "reference_id"]),
    );
    expect(Object.keys(schemas.HostResource.properties)).toEqual([
      "id",
      "tool_name",
      "description",
      "agent_resource",
      "tools",
    ]);
    expect(Object.keys(schemas.SkillResource.properties)).toEqual(["id", "skillId", "executionMode", "hostResources"]);
  });

  it("marks exactly the members the service fills in as readOnly", () => {
    const readOnly = Object.entries(schemas).flatMap(([name, schema]: [string, any]) =>
      Object.entries(schema.properties ?? {}).flatMap(([member, s]: [string, any]) =>
        s.readOnly ? [`${name}.${member}`] : [],
      ),
    );
    expect(readOnly.sort()).toEqual(
      [
        "AgentDefinition.meta",
        "AgentDefinition.reference_id",
        "ExecutionMode.descriptor",
        "ExecutionMode.href",
        "HostResource.id",
        "MimeType.id",
        "Platform.descriptor",
        "Platform.reference_id",
        "Provider.descriptor",
        "Provider.href",
        "SkillResource.id",
        "SkillTag.id",
        "ToolItem.descriptor",
      ].sort(),
    );
  });

  it("states the allowed execution modes and the spec's 80-character media types", () => {
    expect(schemas.ExecutionMode.properties.id.enum).toEqual(["Mode=Ambient", "Mode=Delegate"]);
    expect(schemas.MimeType.properties.type.maxLength).toBe(80);
    expect(schemas.Provider.properties.id.pattern).toBe("^([0-9a-f]{32}|[^\\s=]+=\\S+)$");
  });

  it("accepts the spec's example, as JSON and as the multipart part agentCardAndTools", () => {
    const json = checker.requestBody("POST", "/asor/v1/agentDefinition", "application/json");
    expect(json(exampleDefinition()), JSON.stringify(json.errors)).toBe(true);
    const multipart = checker.requestBody("POST", "/api/asor/v1/default/agentDefinition", "multipart/form-data");
    expect(multipart({ agentCardAndTools: exampleDefinition() }), JSON.stringify(multipart.errors)).toBe(true);
  });

  it("refuses what the service refuses: a missing name, an unknown mode, a proto name instead of the JSON name", () => {
    const validate = checker.component("AgentDefinition");
    const { name: _name, ...nameless } = exampleDefinition();
    expect(validate(nameless)).toBe(false);
    const example = exampleDefinition();
    example.hostConfig[0].executionMode.id = "Mode=Sometimes";
    expect(validate(example)).toBe(false);
    const { externalAgentID, ...renamed } = exampleDefinition();
    expect(validate({ ...renamed, external_agent_id: externalAgentID })).toBe(false);
  });
});

/** Every object of the example with the component schema that describes it, and its JSON path. */
function objectsOf(
  value: any,
  schemaName: string,
  path: string,
): { path: string; schemaName: string; object: Record<string, any> }[] {
  const schema = schemas[schemaName];
  const found = [{ path, schemaName, object: value }];
  for (const [member, memberValue] of Object.entries(value)) {
    const property = schema.properties[member];
    const ref: string | undefined = property.$ref ?? property.items?.$ref;
    if (ref === undefined) continue;
    const name = ref.replace("#/components/schemas/", "");
    const at = path === "" ? member : `${path}.${member}`;
    if (Array.isArray(memberValue))
      memberValue.forEach((item, i) => found.push(...objectsOf(item, name, `${at}[${i}]`)));
    else found.push(...objectsOf(memberValue, name, at));
  }
  return found;
}

/** The service's own contract issues (protovalidate) for a definition. */
function serviceIssues(json: Record<string, any>): readonly { code: string; path?: string }[] {
  return contractIssues(AgentDefinitionSchema, fromJson(AgentDefinitionSchema, json));
}

/** Sets (or with `undefined`, deletes) the member at `path.member` of a copy of `root`. */
function withMember(root: Record<string, any>, path: string, member: string, value: unknown): Record<string, any> {
  const copy = structuredClone(root);
  let target: any = copy;
  for (const step of path.match(/[^.[\]]+/g) ?? []) target = target[step];
  if (value === undefined) delete target[member];
  else target[member] = value;
  return copy;
}

describe("the document and the service agree, member by member of the spec's example", () => {
  const example = exampleDefinition();
  const objects = objectsOf(example, "AgentDefinition", "");

  it("a member is required in the document exactly when the service answers REQUIRED without it", () => {
    let checked = 0;
    for (const { path, schemaName, object } of objects) {
      const required: string[] = schemas[schemaName].required ?? [];
      for (const member of Object.keys(object)) {
        const at = path === "" ? member : `${path}.${member}`;
        const issues = serviceIssues(withMember(example, path, member, undefined));
        const serviceRequires = issues.some((i) => i.code === "REQUIRED" && i.path === at);
        expect(serviceRequires, `${schemaName}.${member} at ${at}`).toBe(required.includes(member));
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(40);
  });

  it("a string one character over the document's maxLength is TOO_LONG to the service, and one at it is not", () => {
    let checked = 0;
    for (const { path, schemaName, object } of objects) {
      for (const member of Object.keys(object)) {
        const maxLength: number | undefined = schemas[schemaName].properties[member].maxLength;
        if (maxLength === undefined) continue;
        const at = path === "" ? member : `${path}.${member}`;
        const tooLong = (length: number) =>
          serviceIssues(withMember(example, path, member, "a".repeat(length))).some(
            (i) => i.code === "TOO_LONG" && i.path === at,
          );
        expect(tooLong(maxLength + 1), `${at} over ${maxLength}`).toBe(true);
        expect(tooLong(maxLength), `${at} at ${maxLength}`).toBe(false);
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(20);
  });
});

/** Whether the service's list takes a request with these parameters (list-query.ts, the REST and RPC lists' parser). */
function listTakes(parts: Partial<ListRequestParts>): boolean {
  try {
    parseListQuery("default", listRequestParts(parts));
    return true;
  } catch {
    return false;
  }
}

describe("the list's query parameters say what the service takes", () => {
  const LIST = "/asor/v1/agentDefinition";

  it("orderBy: the seven orders the service takes, and nothing else", () => {
    const orderBy = document.paths[LIST].get.parameters.find((p: any) => p.name === "orderBy").schema;
    expect(orderBy.enum).toEqual([
      "createdAt",
      "createdAt desc",
      "updatedAt",
      "updatedAt desc",
      "name",
      "name desc",
      "relevance",
    ]);
    for (const order of orderBy.enum) expect(listTakes({ orderBy: order, q: "invoice" }), order).toBe(true);
    // relevance needs q, which the document can only say in words (the parameter's description).
    expect(listTakes({ orderBy: "relevance" })).toBe(false);
    expect(document.paths[LIST].get.parameters.find((p: any) => p.name === "orderBy").description).toContain(
      "only with `q`",
    );
    const validate = checker.parameter("GET", LIST, "orderBy");
    for (const near of [
      "name asc",
      "Name",
      "name  desc",
      "name desc ",
      " name",
      "createdAt DESC",
      "created_at",
      "updatedAt,name",
      "relevance desc",
      "Relevance",
      "",
    ]) {
      expect(listTakes({ orderBy: near }), near).toBe(false);
      expect(validate(near), near).toBe(false);
    }
  });

  it("updatedSince: an RFC 3339 date-time, and every one the document allows, the service takes", () => {
    const schema = document.paths[LIST].get.parameters.find((p: any) => p.name === "updatedSince").schema;
    expect(schema.format).toBe("date-time");
    const validate = checker.parameter("GET", LIST, "updatedSince");
    const two = (max: number) => fc.integer({ min: 0, max }).map((n) => String(n).padStart(2, "0"));
    const offset = fc.oneof(
      fc.constantFrom("Z", "z", ""),
      fc.tuple(fc.constantFrom("+", "-"), two(29), two(69)).map(([sign, h, m]) => `${sign}${h}:${m}`),
    );
    const fraction = fc.option(fc.stringMatching(/^[0-9]{1,11}$/)).map((f) => (f === null ? "" : `.${f}`));
    const year = fc.integer({ min: 0, max: 9999 }).map((n) => String(n).padStart(4, "0"));
    const nearDateTimes = fc
      .tuple(year, two(19), two(39), fc.constantFrom("T", "t", " "), two(29), two(69), two(69), fraction, offset)
      .map(([y, mo, d, t, h, mi, sec, f, z]) => ({
        text: `${y}-${mo}-${d}${t}${h}:${mi}:${sec}${f}${z}`,
        day: Number(d),
        month: Number(mo),
      }));
    let allowed = 0;
    fc.assert(
      fc.property(nearDateTimes, ({ text, day, month }) => {
        const documented = validate(text) as boolean;
        const taken = listTakes({ updatedSince: text });
        if (documented) allowed++;
        // The one difference: the service reads a day past its month's end (April 31) as the next month's.
        const pastMonthEnd = month >= 1 && month <= 12 && day > 28 && day <= 31;
        expect(documented ? taken : !taken || pastMonthEnd, `${text}: document ${documented}, service ${taken}`).toBe(
          true,
        );
      }),
      { numRuns: 5000, seed: 23 },
    );
    expect(allowed).toBeGreaterThan(10);
    for (const text of ["2025-01-31T12:00:00Z", "2025-01-31t12:00:00.123456789+05:30"])
      expect(validate(text) && listTakes({ updatedSince: text }), text).toBe(true);
    for (const text of ["2025-01-31", "yesterday", "2025-01-31T12:00:00.1234567890Z"])
      expect(validate(text) || listTakes({ updatedSince: text }), text).toBe(false);
  });

  it("pageToken: base64url, as the service reads it", () => {
    const validate = checker.parameter("GET", LIST, "pageToken");
    expect(validate("eyJiIjoiYWJjIn0")).toBe(true);
    expect(validate("eyJiIjoiYWJjIn0=")).toBe(false);
    expect(validate("a+b/c")).toBe(false);
  });
});

describe("a status to set", () => {
  it("is one the service takes: not DEFINITION_STATUS_UNSPECIFIED, which it refuses", () => {
    const offered: string[] = schemas.StatusChange.properties.status.enum;
    expect(offered).toEqual(["ACTIVE", "DEPRECATED", "DEACTIVATED"]);
    for (const status of [...offered, "DEFINITION_STATUS_UNSPECIFIED"]) {
      const issues = contractIssues(StatusChangeSchema, fromJson(StatusChangeSchema, { status }));
      expect(issues.length === 0, status).toBe(offered.includes(status));
    }
  });
});

describe("a stored definition's status", () => {
  it("is offered as the statuses a response carries: a stored status is never DEFINITION_STATUS_UNSPECIFIED", () => {
    expect(schemas.RegistryMeta.properties.status.enum).toEqual(["ACTIVE", "DEPRECATED", "DEACTIVATED"]);
  });
});

/** The longest value of each parameter bound by a pattern (each checked below against its schema). */
const PATTERNED = {
  tenant: `T${"t".repeat(62)}`,
  // A tenant named in the admin paths (GetTenant, UpdateTenant).
  name: `T${"t".repeat(62)}`,
  // A provider (provider.id) of 255 characters, each as wide as a URL makes one.
  provider_id: `${WIDEST_CHARACTER.repeat(127)}=${WIDEST_CHARACTER.repeat(127)}`,
  id: "0123456789abcdef0123456789abcdef",
  updatedSince: "2025-01-31T12:00:00.123456789+05:30",
  pageToken: "A".repeat(4096),
  since: "9".repeat(15),
};

describe("any request line the document allows fits under Node's 16 KiB with room for the headers", () => {
  const operations = Object.entries(document.paths).flatMap(([template, item]: [string, any]) =>
    Object.keys(item).map((method) => [method.toUpperCase(), template] as const),
  );

  it.each(operations)("%s %s", (method, template) => {
    const line = longestRequestLine(document, method, template, PATTERNED);
    expect(Buffer.byteLength(line)).toBeLessThanOrEqual(REQUEST_LINE_BUDGET);
  });

  it("the list's is close to the budget, and each patterned value is at its longest", () => {
    const line = longestRequestLine(document, "GET", "/api/asor/v1/{tenant}/agentDefinition", PATTERNED);
    expect(Buffer.byteLength(line)).toBeGreaterThan(REQUEST_LINE_BUDGET - 2048);
    for (const [name, value] of Object.entries(PATTERNED)) {
      const [method, pathname] =
        name === "id"
          ? ["PUT", `/asor/v1/agentDefinition/${value}`]
          : name === "since"
            ? ["GET", "/api/asor/v1/default/agentDefinitionEvents"]
            : name === "name"
              ? ["GET", "/asor/v1/admin/tenants/acme"]
              : name === "provider_id"
                ? ["GET", "/asor/v1/admin/tenants/acme/providers/p=p/keys"]
                : ["GET", "/api/asor/v1/default/agentDefinition"];
      const validate = checker.parameter(method, pathname, name);
      expect(validate(value), name).toBe(true);
      expect(validate(`${value}0`), `${name} one longer`).toBe(false);
    }
  });
});
