// mented for pi: hands pi your action rules before a command runs. Written by `mentectl hooks install pi`.
/*
 * pi loads this file in its own process (jiti: TypeScript, no build step). On each
 * `bash`, `edit` and `write` tool call it asks the mented daemon, over its Unix
 * socket, what to tell the model -- no process is started -- and:
 *
 * - `tool_call` (before the tool runs): a stop, `{block: true, reason}`, when the
 *   daemon says so: the model reads the rules as the tool's error and runs the
 *   command again;
 * - `tool_result` (after it ran): the daemon's context appended to the result;
 * - `before_agent_start`: the pinned rules, as a message of the session;
 * - `session_compact`: the model's context was summarised, so what it was handed
 *   is gone; the daemon hands the rules over again.
 *
 * The rules of mented's hook shim (client/shim.py) hold here too: a hard deadline
 * (250 ms, `MENTED_HOOK_BUDGET_MS` overrides) on the whole exchange, which travels
 * in the request; silence on any failure (no daemon, a timeout, a bad answer, a bug
 * in this file: the tool runs and pi reports nothing); never an approval. A
 * handler of pi's `tool_call` that throws blocks the tool, so no handler here can.
 *
 * The frame is mented's (mented/protocol.py): a 4-byte big-endian length, then a
 * JSON body, `{"type": "hook", "agent": "pi", "deadline": UNIX_SECONDS, "event":
 * EVENT}`; the answer is one such frame whose body is the answer itself (empty:
 * nothing to say). The socket is `$MENTED_SOCKET`, else the one written in below at
 * install, else `$XDG_RUNTIME_DIR/mented/mented.sock`, else
 * `${TMPDIR:-/tmp}/mented-UID/mented.sock`. Node cannot ask a Unix socket who listens
 * on it (no SO_PEERCRED), so the command goes only to a socket that is the user's,
 * in a directory that is the user's and that no one else may write to: there no
 * other user can have put a listener of their own.
 *
 * `mentectl hooks uninstall pi` removes this file; `mentectl doctor` checks that its
 * protocol version is the daemon's. Edit it and mented no longer replaces it.
 */
import * as fs from "node:fs";
import * as net from "node:net";

export const MENTED_PROTOCOL_VERSION = 1;
const SOCKET_WRITTEN_IN = "@MENTED_SOCKET@";
const AGENT = "pi";
const DEFAULT_BUDGET_MS = 250;
const MAX_BUDGET_MS = 10_000;
const MAX_REPLY = 1 << 20;
// The tools whose calls can name an action: the shell, and the file writes (path triggers).
const SHELL_TOOLS = new Set(["bash"]);
const EDIT_TOOLS = new Set(["edit", "write"]);

type Answer = { block?: unknown; reason?: unknown; additionalContext?: unknown };

function socketPath(): string {
	const env = process.env;
	if (env.MENTED_SOCKET) return env.MENTED_SOCKET;
	if (!SOCKET_WRITTEN_IN.startsWith("@")) return SOCKET_WRITTEN_IN;
	if (env.XDG_RUNTIME_DIR) return `${env.XDG_RUNTIME_DIR.replace(/\/+$/, "")}/mented/mented.sock`;
	const tmp = (env.TMPDIR || "/tmp").replace(/\/+$/, "");
	return `${tmp}/mented-${process.getuid?.()}/mented.sock`;
}

function budgetMs(): number {
	const millis = Number.parseInt(process.env.MENTED_HOOK_BUDGET_MS ?? "", 10);
	if (!Number.isFinite(millis) || millis <= 0) return DEFAULT_BUDGET_MS;
	return Math.min(millis, MAX_BUDGET_MS);
}

function ownSocket(path: string): boolean {
	const uid = process.getuid?.();
	const slash = path.lastIndexOf("/");
	if (uid === undefined || slash <= 0) return false;
	const socket = fs.lstatSync(path);
	const directory = fs.lstatSync(path.slice(0, slash));
	return (
		socket.isSocket() &&
		socket.uid === uid &&
		directory.isDirectory() &&
		directory.uid === uid &&
		(directory.mode & 0o022) === 0
	);
}

/** The daemon's answer to `event`, or undefined: never throws, never waits past the budget. */
function ask(event: Record<string, unknown>): Promise<Answer | undefined> {
	return new Promise((resolve) => {
		let done = false;
		let socket: net.Socket | undefined;
		let timer: ReturnType<typeof setTimeout> | undefined;
		const finish = (answer?: Answer) => {
			if (done) return;
			done = true;
			if (timer !== undefined) clearTimeout(timer);
			socket?.destroy();
			resolve(answer);
		};
		try {
			const budget = budgetMs();
			timer = setTimeout(() => finish(), budget);
			const path = socketPath();
			if (!ownSocket(path)) return finish();
			const body = Buffer.from(
				JSON.stringify({ type: "hook", agent: AGENT, deadline: Date.now() / 1000 + budget / 1000, event }),
			);
			const header = Buffer.alloc(4);
			header.writeUInt32BE(body.length);
			const chunks: Buffer[] = [];
			let size = 0;
			socket = net.createConnection(path);
			socket.on("error", () => finish());
			socket.on("close", () => finish());
			socket.on("connect", () => socket?.write(Buffer.concat([header, body])));
			socket.on("data", (chunk: Buffer) => {
				chunks.push(chunk);
				size += chunk.length;
				if (size < 4) return;
				const data = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
				const length = data.readUInt32BE(0);
				if (length > MAX_REPLY) return finish();
				if (data.length < 4 + length) return;
				const reply = data.subarray(4, 4 + length).toString("utf8");
				// Empty: nothing to say; a typed message (an error from the daemon) is never the agent's.
				if (!reply || reply.startsWith('{"type":')) return finish();
				const answer = JSON.parse(reply);
				finish(answer !== null && typeof answer === "object" ? answer : undefined);
			});
		} catch {
			finish();
		}
	});
}

function toolEvent(name: string, event: any, ctx: any): Record<string, unknown> | undefined {
	const input = event?.input;
	let tool: Record<string, unknown>;
	if (SHELL_TOOLS.has(event?.toolName) && typeof input?.command === "string") {
		tool = { command: input.command };
	} else if (EDIT_TOOLS.has(event?.toolName) && typeof input?.path === "string") {
		tool = { path: input.path }; // only the path: a write's content is none of mented's business
	} else {
		return undefined;
	}
	return {
		event: name,
		session_id: ctx?.sessionManager?.getSessionId?.(),
		cwd: ctx?.cwd,
		tool_name: event.toolName,
		tool_call_id: event.toolCallId,
		input: tool,
	};
}

function text(value: unknown): string | undefined {
	return typeof value === "string" && value ? value : undefined;
}

export default function mented(pi: any) {
	pi.on("tool_call", async (event: any, ctx: any) => {
		try {
			const request = toolEvent("tool_call", event, ctx);
			const answer = request && (await ask(request));
			const reason = text(answer?.reason);
			if (answer?.block === true && reason) return { block: true, reason };
		} catch {}
		return undefined;
	});
	pi.on("tool_result", async (event: any, ctx: any) => {
		try {
			const request = toolEvent("tool_result", event, ctx);
			const answer = request && (await ask(request));
			const context = text(answer?.additionalContext);
			if (context && Array.isArray(event.content)) {
				return { content: [...event.content, { type: "text", text: context }] };
			}
		} catch {}
		return undefined;
	});
	pi.on("before_agent_start", async (_event: any, ctx: any) => {
		try {
			const answer = await ask({
				event: "before_agent_start",
				session_id: ctx?.sessionManager?.getSessionId?.(),
				cwd: ctx?.cwd,
			});
			const content = text(answer?.additionalContext);
			if (content) return { message: { customType: "mented", content, display: false } };
		} catch {}
		return undefined;
	});
	pi.on("session_compact", async (_event: any, ctx: any) => {
		try {
			await ask({ event: "session_compact", session_id: ctx?.sessionManager?.getSessionId?.() });
		} catch {}
	});
}
