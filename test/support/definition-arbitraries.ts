/**
 * fast-check arbitraries for agent definitions: valid ones, in the canonical
 * form the service answers with (no empty arrays, no nulls), so a round trip
 * must give back exactly what was sent; and invalid ones, each broken in a way
 * the contract forbids, so every answer must be a 4xx.
 */
import fc from "fast-check";

/** Any Unicode text (4-byte characters, NUL, controls, RTL, combining marks), between `min` and `max` code points. */
export const text = (max: number, min = 0): fc.Arbitrary<string> =>
  fc.string({ unit: "binary", minLength: min, maxLength: max });

/**
 * Any Unicode text a name or identifier may hold, between `min` and `max` code points: `text` without control,
 * format and separator characters (Unicode's Cc, Cf, Zl, Zp: more than src/domain/identifying-text.ts refuses)
 * and without white space at either end.
 */
export const identifier = (max: number, min = 0): fc.Arbitrary<string> =>
  text(max, min)
    .map((s) => s.replace(/[\p{Cc}\p{Cf}\p{Zl}\p{Zp}]/gu, "").trim())
    .filter((s) => s.length >= min);

/** Text without whitespace (JavaScript's `\s`, a superset of RE2's), for the value of a `<key>=<value>` id. */
const word = (max: number): fc.Arbitrary<string> =>
  identifier(max, 1)
    .map((s) => s.replace(/\s/g, "_"))
    .filter((s) => s.length > 0);

/**
 * An id in its hex form. Made once: a stringMatching arbitrary costs milliseconds to make (fast-check tokenizes
 * its bias strings), and made anew for each definition (`reference` runs inside `validDefinition`'s chain) it
 * took 7 of the 24 s of CPU of the 500 REST round trips of test/e2e/properties.test.ts. Arbitraries draw nothing
 * when made: the values are the same.
 */
const hexId = fc.stringMatching(/^[0-9a-f]{32}$/);

const reference = (key: string): fc.Arbitrary<string> =>
  fc.oneof(
    word(255 - key.length - 1).map((v) => `${key}=${v}`),
    hexId,
  );

const url = fc.webUrl({ withQueryParameters: true, withFragments: true }).filter((u) => u.length <= 2048);

const mimeTypes = fc.array(fc.record({ type: identifier(80, 1) }), { minLength: 1, maxLength: 3 });

/** A record where the keys in `optional` may be absent. */
function withOptional<T extends Record<string, fc.Arbitrary<unknown>>>(model: T, optional: (keyof T)[]) {
  const requiredKeys = Object.keys(model).filter((k) => !optional.includes(k)) as (keyof T)[];
  return fc.record(model, { requiredKeys: requiredKeys as never });
}

const skill = (id: string) =>
  withOptional(
    {
      id: fc.constant(id),
      name: identifier(255, 1),
      description: text(10000, 1),
      tags: fc.array(fc.record({ tag: identifier(255, 1) }), { minLength: 1, maxLength: 3 }),
      inputModes: mimeTypes,
      outputModes: mimeTypes,
    },
    ["tags", "inputModes", "outputModes"],
  );

const hostResource = withOptional(
  {
    tool_name: identifier(1000, 1),
    description: text(10000, 1),
    agent_resource: withOptional(
      { id: identifier(255, 1), descriptor: identifier(1000), type: fc.constant("AGENT_ACTION") },
      ["descriptor", "type"],
    ),
    tools: fc.array(fc.record({ id: identifier(255, 1) }), { minLength: 1, maxLength: 3 }),
  },
  ["agent_resource", "tools"],
);

/**
 * A valid definition. `unique` goes into the name and the externalAgentID,
 * so definitions of different runs neither update each other nor clash on
 * A3015.
 */
export function validDefinition(unique: () => string): fc.Arbitrary<Record<string, any>> {
  const skillIds = fc.uniqueArray(identifier(255, 1), { minLength: 1, maxLength: 4 });
  return skillIds.chain((ids) => {
    const skills = fc.tuple(...ids.map((id) => skill(id)));
    const hostConfig = fc.subarray(ids, { minLength: 1 }).chain((configured) =>
      fc.tuple(
        ...configured.map((skillId) =>
          withOptional(
            {
              skillId: fc.constant(skillId),
              executionMode: fc.record({ id: fc.constantFrom("Mode=Ambient", "Mode=Delegate") }),
              hostResources: fc.array(hostResource, { minLength: 1, maxLength: 2 }),
            },
            ["hostResources"],
          ),
        ),
      ),
    );
    return withOptional(
      {
        name: identifier(200, 1),
        description: text(10000, 1),
        url,
        version: identifier(128, 1),
        provider: fc.record({ id: reference("Provider") }),
        platform: fc.record({ id: reference("Platform").filter((id) => id !== "Platform=HOST") }),
        skills,
        capabilities: fc.record(
          { pushNotifications: fc.boolean(), streaming: fc.boolean(), stateTransitionHistory: fc.boolean() },
          { requiredKeys: [] },
        ),
        overview: text(10000),
        iconUrl: url,
        documentationUrl: url,
        externalAgentID: identifier(200, 1),
        externalTenantID: identifier(255),
        defaultInputModes: mimeTypes,
        defaultOutputModes: mimeTypes,
        supportsAuthenticatedExtendedCard: fc.boolean(),
        hostConfig,
      },
      [
        "platform",
        "capabilities",
        "overview",
        "iconUrl",
        "documentationUrl",
        "externalAgentID",
        "externalTenantID",
        "defaultInputModes",
        "defaultOutputModes",
        "supportsAuthenticatedExtendedCard",
        "hostConfig",
      ],
    ).map((def) => {
      const tag = unique();
      def.name = `${tag} ${def.name}`;
      if (def.externalAgentID !== undefined) def.externalAgentID = `${tag} ${def.externalAgentID}`;
      return def as Record<string, any>;
    });
  });
}

/** Members the contract requires, as paths into a valid definition. */
const REQUIRED = [
  "name",
  "description",
  "url",
  "version",
  "provider",
  "provider.id",
  "skills",
  "skills[0].id",
  "skills[0].name",
  "skills[0].description",
];

/** String members and their limits, as paths present in every valid definition. */
const LIMITED = [
  ["name", 255],
  ["description", 10000],
  ["url", 2048],
  ["version", 128],
  ["skills[0].id", 255],
  ["skills[0].name", 255],
  ["skills[0].description", 10000],
] as const;

/** Every object of the definition, with its path: where an unknown member can go. */
function objectsOf(value: unknown, path = ""): [string, Record<string, unknown>][] {
  if (Array.isArray(value)) return value.flatMap((v, i) => objectsOf(v, `${path}[${i}]`));
  if (typeof value !== "object" || value === null) return [];
  const here: [string, Record<string, unknown>] = [path, value as Record<string, unknown>];
  return [here, ...Object.entries(value).flatMap(([k, v]) => objectsOf(v, path === "" ? k : `${path}.${k}`))];
}

/** Every string member of the definition, with its path. */
function stringsOf(value: unknown, path = ""): string[] {
  if (Array.isArray(value)) return value.flatMap((v, i) => stringsOf(v, `${path}[${i}]`));
  if (typeof value === "string") return [path];
  if (typeof value !== "object" || value === null) return [];
  return Object.entries(value).flatMap(([k, v]) => stringsOf(v, path === "" ? k : `${path}.${k}`));
}

function steps(path: string): (string | number)[] {
  return [...path.matchAll(/([^.[\]]+)|\[(\d+)\]/g)].map((m) => (m[2] === undefined ? (m[1] as string) : Number(m[2])));
}

function parentOf(root: Record<string, any>, path: string): [any, string | number] {
  const all = steps(path);
  const last = all.pop() as string | number;
  let at: any = root;
  for (const step of all) at = at[step];
  return [at, last];
}

/** Names the contract knows anywhere (JSON and proto names): an unknown member must be none of them. */
const KNOWN = new Set(
  "id name description url version provider platform skills capabilities overview iconUrl icon_url " +
    "documentationUrl documentation_url externalAgentID external_agent_id externalTenantID external_tenant_id " +
    "defaultInputModes default_input_modes defaultOutputModes default_output_modes " +
    "supportsAuthenticatedExtendedCard supports_authenticated_extended_card hostConfig host_config reference_id " +
    "referenceId descriptor href pushNotifications push_notifications streaming stateTransitionHistory " +
    "state_transition_history type tags inputModes input_modes outputModes output_modes tag skillId skill_id " +
    "executionMode execution_mode hostResources host_resources tool_name toolName agent_resource agentResource " +
    "tools".split(" "),
);

/** A definition broken in one way the contract forbids, as a JSON value. */
export type BrokenDefinition = { readonly kind: string; readonly value: unknown };

/** A mutation of a valid definition (as a JSON value) that makes it invalid. */
export function brokenDefinition(unique: () => string): fc.Arbitrary<BrokenDefinition> {
  return validDefinition(unique).chain((def) => {
    const strings = stringsOf(def);
    const objects = objectsOf(def);
    const mutate = (kind: string, change: (copy: Record<string, any>) => void) =>
      fc.constant(null).map(() => {
        const copy = structuredClone(def);
        change(copy);
        return { kind, value: copy };
      });
    return fc.oneof(
      fc
        .constantFrom(...REQUIRED)
        .chain((path) => mutate(`without ${path}`, (c) => void delete parentOf(c, path)[0][parentOf(c, path)[1]])),
      fc
        .tuple(fc.constantFrom(...LIMITED), fc.integer({ min: 1, max: 40 }))
        .chain(([[path, max], extra]) =>
          mutate(
            `${path} too long`,
            (c) => void (parentOf(c, path)[0][parentOf(c, path)[1]] = "x".repeat(max + extra)),
          ),
        ),
      fc
        .tuple(
          fc.constantFrom(...strings),
          fc.oneof(fc.integer(), fc.boolean(), fc.array(fc.string(), { maxLength: 2 }), fc.object({ maxDepth: 1 })),
        )
        .chain(([path, wrong]) =>
          mutate(`${path} of the wrong type`, (c) => void (parentOf(c, path)[0][parentOf(c, path)[1]] = wrong)),
        ),
      fc
        .tuple(
          fc.constantFrom(...objects.map(([p]) => p)),
          fc.string({ minLength: 1, maxLength: 12 }).filter((k) => !KNOWN.has(k) && k !== "__proto__"),
          fc.jsonValue({ maxDepth: 2 }),
        )
        .chain(([path, key, value]) =>
          mutate(`unknown member ${key} in ${path || "the body"}`, (c) => {
            const target = path === "" ? c : parentOf(c, path)[0][parentOf(c, path)[1]];
            target[key] = value;
          }),
        ),
      fc
        .string({ maxLength: 20 })
        .filter((s) => !/^([0-9a-f]{32}|[^\s=]+=\S+)$/.test(s))
        .chain((id) => mutate("provider.id not an instance id", (c) => void (c.provider.id = id))),
      fc
        .string({ maxLength: 20 })
        .filter((m) => m !== "Mode=Ambient" && m !== "Mode=Delegate")
        .chain((mode) =>
          mutate("executionMode.id not allowed", (c) => {
            c.hostConfig = [{ skillId: c.skills[0].id, executionMode: { id: mode } }];
          }),
        ),
      mutate("a duplicate skill id", (c) => void c.skills.push(structuredClone(c.skills[0]))),
      text(20, 1).chain((ghost) =>
        mutate("hostConfig names no skill", (c) => {
          c.skills = c.skills.filter((s: any) => s.id !== ghost);
          if (c.skills.length === 0) c.skills = [{ id: `${ghost}-other`, name: "n", description: "d" }];
          c.hostConfig = [{ skillId: ghost, executionMode: { id: "Mode=Ambient" } }];
        }),
      ),
      fc
        .integer({ min: 51, max: 60 })
        .chain((n) =>
          mutate(
            "too many tags",
            (c) => void (c.skills[0].tags = Array.from({ length: n }, (_, i) => ({ tag: `t${i}` }))),
          ),
        ),
      fc
        .integer({ min: 101, max: 105 })
        .chain((n) =>
          mutate(
            "too many skills",
            (c) =>
              void (c.skills = Array.from({ length: n }, (_, i) => ({ id: `s${i}`, name: "n", description: "d" }))),
          ),
        ),
      fc
        .string({ maxLength: 30 })
        .filter((u) => !u.includes(":"))
        .chain((u) => mutate("url not absolute", (c) => void (c.url = u))),
      mutate("the host platform for a third-party provider", (c) => {
        c.provider = { id: "Provider=Acme" };
        c.platform = { id: "Platform=HOST" };
      }),
      fc.jsonValue({ maxDepth: 3 }).map((value) => ({ kind: "any JSON value", value })),
    );
  });
}

/** A JSON text broken below the JSON value: syntax, duplicates, depth, encoding. */
export function brokenText(unique: () => string): fc.Arbitrary<{ kind: string; bytes: Uint8Array }> {
  const encode = (s: string) => new TextEncoder().encode(s);
  return validDefinition(unique).chain((def) => {
    const json = JSON.stringify(def);
    return fc.oneof(
      fc
        .integer({ min: 0, max: json.length - 1 })
        .map((n) => ({ kind: `cut at ${n}`, bytes: encode(json.slice(0, n)) })),
      fc.constantFrom("name", "description", "url", "version", "skills").map((key) => ({
        kind: `${key} twice`,
        bytes: encode(`{"${key}":${JSON.stringify(def[key])},${json.slice(1)}`),
      })),
      fc.integer({ min: 33, max: 5000 }).map((depth) => ({
        kind: `nested ${depth} deep`,
        bytes: encode(`{"deep":${"[".repeat(depth)}${"]".repeat(depth)},${json.slice(1)}`),
      })),
      fc.constantFrom([0xff], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]).map((bad) => {
        const at = json.indexOf('"', json.indexOf('"name"') + 7) + 1;
        return {
          kind: `invalid UTF-8 ${bad}`,
          bytes: new Uint8Array([...encode(json.slice(0, at)), ...bad, ...encode(json.slice(at))]),
        };
      }),
      fc.constantFrom("\\ud800", "\\udfff", "\\ud83d\\u0041").map((escaped) => ({
        kind: `lone surrogate ${escaped}`,
        bytes: encode(json.replace('"name":"', `"name":"${escaped}`)),
      })),
      fc.uint8Array({ maxLength: 200 }).map((bytes) => ({ kind: "random bytes", bytes })),
    );
  });
}
