import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { SCENARIOS_FILE, SDK_DIR } from "./server.js";

test("every scenario in sdk/scenarios.json is named by a test", () => {
  const scenarios = JSON.parse(readFileSync(SCENARIOS_FILE, "utf8")) as { scenarios: Array<{ id: string }> };
  const ids = scenarios.scenarios.map((s) => s.id);
  assert.ok(ids.length > 0);
  const testDir = join(SDK_DIR, "test");
  const names: string[] = [];
  for (const f of readdirSync(testDir)) {
    if (!f.endsWith(".test.ts") || f === "coverage.test.ts") continue;
    const src = readFileSync(join(testDir, f), "utf8");
    for (const m of src.matchAll(/\btest\(\s*(["'`])((?:(?!\1).)*)\1/g)) names.push(m[2]!);
  }
  const missing = ids.filter((id) => !names.some((n) => n.split(/[\s:]/).includes(id)));
  assert.deepEqual(missing, [], `scenarios with no test named after them: ${missing.join(", ")}`);
});
