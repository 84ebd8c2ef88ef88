/**
 * Definitions whose texts are words that never repeat (issue 50): each is a
 * row of the term index, so their writes do the most term work a body of
 * their size can ask for. ~950 KB of them (95 skills of 10,000 characters)
 * made about 76,000 term rows.
 */
import { minimalDefinition } from "./definitions.js";

/** Words of 10 characters ("w" and 9 base-36 digits), distinct across calls with distinct `from`. */
function words(from: number, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `w${(from + i).toString(36).padStart(9, "0")}`);
}

/**
 * A valid definition named `name` whose skills' descriptions hold `count` distinct words (11 characters each
 * with its space) starting at word number `from`: 909 per skill, 10,000 characters at most per description.
 */
export function distinctWordsDefinition(name: string, from: number, count: number): Record<string, any> {
  const perSkill = 909;
  const skills = Array.from({ length: Math.ceil(count / perSkill) }, (_, s) => ({
    id: `s${s}`,
    name: `Skill ${s}`,
    description: words(from + s * perSkill, Math.min(perSkill, count - s * perSkill)).join(" "),
  }));
  return minimalDefinition({ name, skills });
}
