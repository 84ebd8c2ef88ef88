/**
 * A definition's search index (DefinitionIndex: its terms and its full-text
 * text) made in one pass a text at a time (issue 50): what it holds, spelled
 * out by hand for texts whose folding has corners; that it stops after each
 * text and inTurns gives the event loop back between slices; and that the
 * versions a write stores (withDerivedFields) have the index of the
 * definition its admission made it from.
 */
import { create, fromJson } from "@bufbuild/protobuf";
import { describe, expect, it } from "vitest";
import { AgentDefinitionSchema } from "../../gen/asor/v1/agent_definition_pb.js";
import { withDerivedFields } from "../../src/domain/derived-fields.js";
import {
  definitionIndexOf,
  fullTextOf,
  indexSteps,
  inTurns,
  sameIndex,
  searchableTextsOf,
} from "../../src/domain/search-terms.js";
import { exampleDefinition } from "../support/definitions.js";

/** Greek capitals (a final sigma), a ligature, a dotted capital I, marks composed and decomposed, repeats. */
const cornered = create(AgentDefinitionSchema, {
  name: "ΟΔΟΣ Agent",
  description: "Café ﬁles for İstanbul; ΣΑΣ",
  url: "https://agents.example.com/cornered",
  version: "1.0.0",
  provider: { id: "Provider=Acme" },
  skills: [
    {
      id: "s1",
      name: "\u0301Résumé",
      description: "e\u0301tude x yz ΟΔΟΣ",
      tags: [{ tag: "Finance" }, { tag: "Finance" }],
    },
  ],
  hostConfig: [
    { executionMode: { id: "Mode=Sync" }, hostResources: [{ toolName: "send_mail", agentResource: { id: "Res=1" } }] },
  ],
});

describe("a definition's search index", () => {
  it("holds its filter values, then its folded words, each once, and the words of its texts in order", () => {
    const index = definitionIndexOf(cornered);
    expect(index.terms).toEqual([
      { kind: "name", value: "ΟΔΟΣ Agent" },
      { kind: "provider", value: "Provider=Acme" },
      { kind: "version", value: "1.0.0" },
      { kind: "skillId", value: "s1" },
      { kind: "tag", value: "Finance" },
      { kind: "executionMode", value: "Mode=Sync" },
      { kind: "resource", value: "Res=1" },
      ...["οδος", "agent", "cafe", "files", "for", "istanbul", "σας", "resume", "etude", "finance", "send", "mail"].map(
        (value) => ({ kind: "word", value }),
      ),
    ]);
    // Lower case, not folded; the tool names are not in it; a word of one letter or two is.
    expect(index.text).toBe("οδος agent café ﬁles for i stanbul σας résumé e tude x yz οδος finance finance");
    expect(fullTextOf(cornered)).toBe(index.text);
  });

  it("is made a searchable text at a time, and inTurns gives the event loop back between slices", async () => {
    const def = fromJson(AgentDefinitionSchema, exampleDefinition());
    const steps = indexSteps(def);
    let stops = 0;
    let step = steps.next();
    for (; !step.done; step = steps.next()) stops++;
    expect(stops).toBe(searchableTextsOf(def).length);
    expect(sameIndex(step.value, definitionIndexOf(def))).toBe(true);

    let timerRan = false;
    setTimeout(() => (timerRan = true), 0);
    // Slices of no time: the loop comes round after every text.
    const index = await inTurns(indexSteps(def), 0);
    expect(timerRan).toBe(true);
    expect(sameIndex(index, definitionIndexOf(def))).toBe(true);
  });

  it("is the same for the versions a write stores: their derived fields are no text and no filter value", () => {
    const def = fromJson(AgentDefinitionSchema, exampleDefinition());
    const index = definitionIndexOf(def);
    for (const derived of [
      withDerivedFields(def, "0123456789abcdef0123456789abcdef", ""),
      withDerivedFields(def, "0123456789abcdef0123456789abcdef", "Agent_ID=A7"),
    ])
      expect(definitionIndexOf(derived)).toEqual(index);
  });

  it("tells indexes apart by any term, its order, or the text", () => {
    const index = definitionIndexOf(cornered);
    const [first, second, ...rest] = index.terms;
    expect(sameIndex(index, { ...index })).toBe(true);
    expect(sameIndex(index, { ...index, text: `${index.text} more` })).toBe(false);
    expect(sameIndex(index, { ...index, terms: [second!, first!, ...rest] })).toBe(false);
    expect(sameIndex(index, { ...index, terms: [first!, { ...second!, value: "other" }, ...rest] })).toBe(false);
    expect(sameIndex(index, { ...index, terms: index.terms.slice(1) })).toBe(false);
  });
});
