// Loads mented's pi extension as pi 0.73 does (jiti, default export) and calls its handlers.
//
// Usage: node pi_harness.mjs JITI_PACKAGE_DIR EXTENSION_FILE < requests
// Each stdin line is {"on": HANDLER, "event": {...}, "cwd": ..., "session": ..., "repeat": N};
// each stdout line is {"result": WHAT_THE_HANDLER_RETURNED, "threw": bool, "us": [per call]}.
// The test (tests/test_pi.py) and the benchmark (docs/benchmarks.md) drive it.
import { createRequire } from "node:module";
import * as readline from "node:readline";

const [jitiDir, extensionPath] = process.argv.slice(2);
const require = createRequire(import.meta.url);
const { createJiti } = require(`${jitiDir}/lib/jiti.cjs`);
const jiti = createJiti(import.meta.url, { moduleCache: false });
const factory = await jiti.import(extensionPath, { default: true });
const handlers = new Map();
factory({ on: (name, handler) => handlers.set(name, handler) });

const lines = readline.createInterface({ input: process.stdin });
for await (const line of lines) {
	if (!line.trim()) continue;
	const request = JSON.parse(line);
	const ctx = { cwd: request.cwd, sessionManager: { getSessionId: () => request.session } };
	const handler = handlers.get(request.on);
	const us = [];
	let result;
	let threw = false;
	for (let i = 0; i < (request.repeat ?? 1); i++) {
		const started = process.hrtime.bigint();
		try {
			result = await handler(structuredClone(request.event), ctx);
		} catch {
			threw = true;
		}
		us.push(Number(process.hrtime.bigint() - started) / 1000);
	}
	process.stdout.write(`${JSON.stringify({ result: result ?? null, threw, us })}\n`);
}
