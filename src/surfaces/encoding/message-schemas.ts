import {
  type DescEnum,
  type DescField,
  type DescMessage,
  getOption,
  type JsonObject,
  type JsonValue,
  ScalarType,
  toJson,
} from "@bufbuild/protobuf";
import { FeatureSet_FieldPresence } from "@bufbuild/protobuf/wkt";
import {
  FieldRulesSchema,
  field as fieldRulesExtension,
} from "@bufbuild/protovalidate/gen/buf/validate/validate_pb.js";
import { leadingComment } from "./proto-comments.js";

/**
 * A field whose leading comment starts with "Read-only" is one the service
 * fills in and ignores on input (derived ids, descriptors, hrefs, reference
 * ids): the proto's own wording for them, so the document marks it `readOnly`.
 */
const READ_ONLY = /^Read-only\b/;
/** A message whose comment says the service fills it and a client never sends it (RegistryMeta). */
const OUTPUT_ONLY = /\boutput only\b/i;

/** JSON Schemas of protobuf messages in their JSON form, as the REST surface speaks it. */
export interface MessageSchemas {
  /** A `$ref` to the component of `desc`, adding it (and every message it uses) to the components. */
  ref(desc: DescMessage): JsonObject;
  /** The schema of one field: its JSON type, its protovalidate rules, its comment, `readOnly`. */
  field(field: DescField): JsonObject;
  /** Whether the contract requires the field (protovalidate `required`). */
  isRequired(field: DescField): boolean;
  /** Every component made so far, by name. */
  components(): JsonObject;
}

function scalarSchema(type: ScalarType): JsonObject {
  switch (type) {
    case ScalarType.STRING:
      return { type: "string" };
    case ScalarType.BOOL:
      return { type: "boolean" };
    case ScalarType.INT32:
    case ScalarType.SINT32:
    case ScalarType.SFIXED32:
      return { type: "integer", format: "int32" };
    case ScalarType.UINT32:
    case ScalarType.FIXED32:
      return { type: "integer", minimum: 0, maximum: 2 ** 32 - 1 };
    case ScalarType.DOUBLE:
      return { type: "number", format: "double" };
    case ScalarType.FLOAT:
      return { type: "number", format: "float" };
    case ScalarType.BYTES:
      return { type: "string", contentEncoding: "base64" };
    default:
      // 64-bit integers are strings in protobuf JSON.
      return { type: "string", pattern: "^-?[0-9]+$", format: "int64" };
  }
}

function enumSchema(desc: DescEnum): JsonObject {
  return { type: "string", enum: desc.values.map((v) => v.name) };
}

/**
 * JSON Schema keywords for the protovalidate rules of one kind; a rule with no JSON Schema form stops the
 * generator.
 */
const STRING_RULES: Record<string, (value: JsonValue) => JsonObject> = {
  minLen: (v) => ({ minLength: Number(v) }),
  maxLen: (v) => ({ maxLength: Number(v) }),
  len: (v) => ({ minLength: Number(v), maxLength: Number(v) }),
  pattern: (v) => ({ pattern: v }),
  in: (v) => ({ enum: v }),
  notIn: (v) => ({ not: { enum: v } }),
  const: (v) => ({ const: v }),
  uri: () => ({ format: "uri" }),
  email: () => ({ format: "email" }),
  hostname: () => ({ format: "hostname" }),
  uuid: () => ({ format: "uuid" }),
  ipv4: () => ({ format: "ipv4" }),
  ipv6: () => ({ format: "ipv6" }),
};
const NUMBER_RULES: Record<string, (value: JsonValue) => JsonObject> = {
  gte: (v) => ({ minimum: v }),
  lte: (v) => ({ maximum: v }),
  gt: (v) => ({ exclusiveMinimum: v }),
  lt: (v) => ({ exclusiveMaximum: v }),
  const: (v) => ({ const: v }),
  in: (v) => ({ enum: v }),
  notIn: (v) => ({ not: { enum: v } }),
};
const REPEATED_RULES: Record<string, (value: JsonValue) => JsonObject> = {
  minItems: (v) => ({ minItems: Number(v) }),
  maxItems: (v) => ({ maxItems: Number(v) }),
  unique: (v): JsonObject => (v === true ? { uniqueItems: true } : {}),
};
/** `enum` lists the defined values already; `defined_only` adds nothing to it. */
const ENUM_RULES: Record<string, (value: JsonValue) => JsonObject> = {
  definedOnly: () => ({}),
};
const RULES_BY_KIND: Record<string, Record<string, (value: JsonValue) => JsonObject>> = {
  enum: ENUM_RULES,
  string: STRING_RULES,
  int32: NUMBER_RULES,
  sint32: NUMBER_RULES,
  sfixed32: NUMBER_RULES,
  uint32: NUMBER_RULES,
  fixed32: NUMBER_RULES,
  double: NUMBER_RULES,
  float: NUMBER_RULES,
  repeated: REPEATED_RULES,
};

/** The JSON Schema keywords of a protovalidate rules object (`{"string": {"maxLen": "255"}, "required": true}`). */
function ruleKeywords(rules: JsonObject, where: string): JsonObject {
  const out: JsonObject = {};
  for (const [kind, value] of Object.entries(rules)) {
    if (kind === "required") continue; // the parent's `required` list, below
    const table = RULES_BY_KIND[kind];
    if (table === undefined)
      throw new Error(
        `${where}: protovalidate rules "${kind}" have no OpenAPI form; teach ` +
          `src/surfaces/encoding/message-schemas.ts`,
      );
    for (const [rule, ruleValue] of Object.entries(value as JsonObject)) {
      if (kind === "repeated" && rule === "items") continue; // applied to the items' schema
      const keyword = table[rule];
      if (keyword === undefined)
        throw new Error(
          `${where}: protovalidate rule "${kind}.${rule}" has no OpenAPI form; teach ` +
            `src/surfaces/encoding/message-schemas.ts`,
        );
      Object.assign(out, keyword(ruleValue));
    }
  }
  return out;
}

function rulesOf(field: DescField): JsonObject {
  return toJson(FieldRulesSchema, getOption(field, fieldRulesExtension)) as JsonObject;
}

/**
 * JSON Schemas of messages, built from their descriptors: exact JSON names,
 * `required` and string limits from the protovalidate rules the service
 * enforces, unknown members refused (`additionalProperties: false`, as the
 * service refuses them), descriptions from the proto comments. Components are
 * named after the message, or as `names` says (full type name -> name).
 */
export function createMessageSchemas(names: Readonly<Record<string, string>> = {}): MessageSchemas {
  return new SchemaBuilder(names);
}

/** createMessageSchemas's schemas: each component built once, when first referred to. */
class SchemaBuilder implements MessageSchemas {
  readonly #components = new Map<string, JsonObject>();
  readonly #owners = new Map<string, string>();
  constructor(private readonly names: Readonly<Record<string, string>>) {}

  #componentName(desc: DescMessage): string {
    const name = this.names[desc.typeName] ?? desc.name;
    const owner = this.#owners.get(name);
    if (owner !== undefined && owner !== desc.typeName)
      throw new Error(`${owner} and ${desc.typeName} would both be the component ${name}`);
    this.#owners.set(name, desc.typeName);
    return name;
  }

  ref(desc: DescMessage): JsonObject {
    if (desc.typeName === "google.protobuf.Timestamp") return { type: "string", format: "date-time" };
    // A Struct's JSON is any JSON object (a JWS's unprotected header).
    if (desc.typeName === "google.protobuf.Struct") return { type: "object", additionalProperties: true };
    if (desc.typeName.startsWith("google.protobuf."))
      throw new Error(`${desc.typeName} has no OpenAPI form yet; teach src/surfaces/encoding/message-schemas.ts`);
    const name = this.#componentName(desc);
    if (!this.#components.has(name)) {
      this.#components.set(name, {}); // reserved first: messages may refer to themselves
      this.#components.set(name, this.#messageSchema(desc));
    }
    return { $ref: `#/components/schemas/${name}` };
  }

  isRequired(field: DescField): boolean {
    return rulesOf(field).required === true;
  }

  #valueSchema(field: DescField, kind: "scalar" | "enum" | "message", rules: JsonObject): JsonObject {
    if (kind === "message") return this.ref(field.message as DescMessage);
    const base = kind === "enum" ? enumSchema(field.enum as DescEnum) : scalarSchema(field.scalar as ScalarType);
    return { ...base, ...ruleKeywords(rules, `${field.parent.typeName}.${field.name}`) };
  }

  field(desc: DescField): JsonObject {
    const rules = rulesOf(desc);
    const where = `${desc.parent.typeName}.${desc.name}`;
    let schema: JsonObject;
    switch (desc.fieldKind) {
      case "list": {
        const repeated = (rules.repeated ?? {}) as JsonObject;
        const itemRules = (repeated.items ?? {}) as JsonObject;
        schema = {
          type: "array",
          items: this.#valueSchema(desc, desc.listKind, itemRules),
          ...ruleKeywords({ repeated }, where),
        };
        if (rules.required === true) schema.minItems = Math.max(Number(schema.minItems ?? 0), 1);
        break;
      }
      case "map":
        schema = { type: "object", additionalProperties: this.#valueSchema(desc, desc.mapKind, {}) };
        break;
      default:
        schema = singularSchema(desc, this.#valueSchema(desc, desc.fieldKind, rules), rules);
    }
    const description = leadingComment(desc);
    return {
      ...schema,
      ...(description === "" ? {} : { description }),
      ...(READ_ONLY.test(description) ? { readOnly: true } : {}),
    };
  }

  #messageSchema(desc: DescMessage): JsonObject {
    const properties: JsonObject = {};
    for (const f of desc.fields) properties[f.jsonName] = this.field(f);
    const required = desc.fields.filter((f) => this.isRequired(f)).map((f) => f.jsonName);
    const description = leadingComment(desc);
    return {
      type: "object",
      ...(description === "" ? {} : { description }),
      properties,
      ...(required.length > 0 ? { required } : {}),
      additionalProperties: false,
    };
  }

  components(): JsonObject {
    return Object.fromEntries([...this.#components].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
  }
}

/** A singular field's schema (`schema`, its value's) with what `required` means for it. */
function singularSchema(
  desc: DescField & { fieldKind: "scalar" | "enum" | "message" },
  schema: JsonObject,
  rules: JsonObject,
): JsonObject {
  // `required` on a field without presence means "not empty" to protovalidate.
  const closed = schema.enum !== undefined || schema.const !== undefined;
  const implicit = desc.presence === FeatureSet_FieldPresence.IMPLICIT;
  if (
    rules.required === true &&
    !closed &&
    desc.fieldKind === "scalar" &&
    desc.scalar === ScalarType.STRING &&
    implicit
  ) {
    schema.minLength = Math.max(Number(schema.minLength ?? 0), 1);
  }
  // On an enum without presence `required` means "not the zero value", so the document does not offer
  // it; nor in an output-only message, since protobuf JSON leaves a field without presence out at its
  // zero value: no response carries it.
  const outputOnly = OUTPUT_ONLY.test(leadingComment(desc.parent));
  if ((rules.required === true || outputOnly) && desc.fieldKind === "enum" && implicit) {
    const zero = desc.enum.values.find((v) => v.number === 0)?.name;
    schema.enum = (schema.enum as JsonValue[]).filter((name) => name !== zero);
  }
  return schema;
}
