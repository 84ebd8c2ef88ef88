import { fromJson } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { identifyingTextIssues, identifyingTextProblem } from "../../src/domain/identifying-text.js";
import { exampleDefinition, minimalDefinition } from "../support/definitions.js";

const definition = (json: Record<string, unknown>) => fromJson(AgentDefinitionSchema, json as never);

/** A definition with a member at every identifying path, each holding `text` (or text made from it). */
function withEverywhere(text: string): Record<string, unknown> {
  return minimalDefinition({
    id: text,
    name: text,
    version: text,
    provider: { id: text },
    platform: { id: text },
    externalAgentID: text,
    externalTenantID: text,
    defaultInputModes: [{ type: text }],
    defaultOutputModes: [{ type: "text/plain" }, { type: text }],
    skills: [
      { id: "fine", name: "Fine", description: text },
      {
        id: text,
        name: text,
        description: text,
        tags: [{ tag: "ok" }, { tag: text }],
        inputModes: [{ type: text }],
        outputModes: [{ type: text }],
      },
    ],
    hostConfig: [
      {
        skillId: text,
        executionMode: { id: "Mode=Ambient" },
        hostResources: [
          {
            tool_name: text,
            description: text,
            agent_resource: { id: text, descriptor: text },
            tools: [{ id: text }],
          },
        ],
      },
    ],
    overview: text,
    description: text,
  });
}

describe("identifying text (names and identifiers)", () => {
  it("accepts the spec's example, and names with inner spaces, accents, other scripts and emoji", () => {
    expect(identifyingTextIssues(definition(exampleDefinition()))).toEqual([]);
    for (const name of ["Customer Service Agent", "Café e\u0301", "مرحبا بالعالم", "漢字 한국어", "Rocket 🚀", "a"])
      expect(identifyingTextProblem(name), name).toBeUndefined();
  });

  it.each([
    ["NUL", "guard\u0000ed", "U+0000, a control character"],
    ["ESC (a terminal escape)", "guarded\u001b[31m", "U+001B, a control character"],
    ["a tab", "guarded\tagent", "U+0009, a control character"],
    ["a newline", "guarded\n", "U+000A, a control character"],
    ["DEL", "guarded\u007f", "U+007F, a control character"],
    ["a C1 control (NEL)", "guarded\u0085x", "U+0085, a control character"],
    ["a C1 control (CSI)", "guarded\u009bx", "U+009B, a control character"],
    ["RIGHT-TO-LEFT OVERRIDE", "\u202edeugra", "U+202E, a bidirectional formatting character"],
    ["LEFT-TO-RIGHT EMBEDDING", "a\u202ab", "U+202A, a bidirectional formatting character"],
    ["RIGHT-TO-LEFT ISOLATE", "a\u2067b\u2069", "U+2067, a bidirectional formatting character"],
    ["LEFT-TO-RIGHT MARK", "a\u200eb", "U+200E, a bidirectional formatting character"],
    ["RIGHT-TO-LEFT MARK", "a\u200fb", "U+200F, a bidirectional formatting character"],
    ["ARABIC LETTER MARK", "a\u061cb", "U+061C, a bidirectional formatting character"],
    ["ZERO WIDTH SPACE", "guar\u200bded", "U+200B, a zero-width character"],
    ["ZERO WIDTH NON-JOINER", "guar\u200cded", "U+200C, a zero-width character"],
    ["ZERO WIDTH JOINER", "guar\u200dded", "U+200D, a zero-width character"],
    ["WORD JOINER", "guar\u2060ded", "U+2060, a zero-width character"],
    ["a byte order mark", "\ufeffguarded", "U+FEFF, a zero-width character"],
    ["LINE SEPARATOR", "guarded\u2028x", "U+2028, a line or paragraph separator"],
    ["PARAGRAPH SEPARATOR", "guarded\u2029x", "U+2029, a line or paragraph separator"],
  ])("refuses %s anywhere, naming the character", (_label, text, words) => {
    expect(identifyingTextProblem(text)).toBe(
      `holds ${words}: names and identifiers may not hold control, bidirectional formatting, zero-width or line ` +
        "separator characters.",
    );
  });

  it.each([
    ["a trailing space", "guarded ", "ends with white space (U+0020)"],
    ["a leading space", " guarded", "begins with white space (U+0020)"],
    ["a trailing no-break space", "guarded\u00a0", "ends with white space (U+00A0)"],
    ["a leading ideographic space", "\u3000guarded", "begins with white space (U+3000)"],
    ["only a space", " ", "begins with white space (U+0020)"],
  ])("refuses %s", (_label, text, words) => {
    expect(identifyingTextProblem(text)).toBe(`${words}: names and identifiers may not begin or end with white space.`);
  });

  it("names every identifying member that breaks the rule by its JSON path, and leaves free text alone", () => {
    const issues = identifyingTextIssues(definition(withEverywhere("bad\u0000")));
    expect(issues.map((i) => i.path)).toEqual([
      "id",
      "name",
      "version",
      "provider.id",
      "platform.id",
      "externalAgentID",
      "externalTenantID",
      "defaultInputModes[0].type",
      "defaultOutputModes[1].type",
      "skills[1].id",
      "skills[1].name",
      "skills[1].tags[1].tag",
      "skills[1].inputModes[0].type",
      "skills[1].outputModes[0].type",
      "hostConfig[0].skillId",
      "hostConfig[0].hostResources[0].tool_name",
      "hostConfig[0].hostResources[0].agent_resource.id",
      "hostConfig[0].hostResources[0].agent_resource.descriptor",
      "hostConfig[0].hostResources[0].tools[0].id",
    ]);
    expect(issues[1]).toEqual({
      code: "INVALID_CHARACTER",
      field: "name",
      path: "name",
      message:
        "name holds U+0000, a control character: names and identifiers may not hold control, bidirectional " +
        "formatting, zero-width or line separator characters.",
    });
    expect(issues.find((i) => i.path === "hostConfig[0].hostResources[0].tool_name")?.field).toBe("tool_name");
  });

  it("finds nothing in a definition whose free text holds all of it", () => {
    const text = "Tab\there, NUL\u0000, ESC\u001b[0m, \u202eoverride\u202c, zero\u200bwidth, trailing ";
    const def = minimalDefinition({
      description: text,
      overview: text,
      skills: [{ id: "s1", name: "Skill one", description: text }],
    });
    expect(identifyingTextIssues(definition(def))).toEqual([]);
  });
});
