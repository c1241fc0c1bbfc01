// mented for pi: hands pi your action rules before a command runs. Written by `mentectl hooks install pi`.
/*
 * pi loads this file in its own process (jiti: TypeScript, no build step). On each
 * `bash`, `edit` and `write` tool call it asks the mented daemon, over its Unix
 * socket, what to tell the model -- no process is started, and one connection is
 * kept between calls (it never keeps pi running) -- and:
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
 * in a directory of the user's (or root's) that no one else may write to, or that
 * is sticky (/tmp): there no other user can have put a listener of their own.
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
const MAX_REQUEST = 1 << 20; // as the shim's stdin: a larger call is no command mented can help with
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
	// In a folder others may write to, only the sticky bit (/tmp) keeps them from
	// replacing the user's socket with their own.
	return (
		socket.isSocket() &&
		socket.uid === uid &&
		directory.isDirectory() &&
		(directory.uid === uid || directory.uid === 0) &&
		((directory.mode & 0o022) === 0 || (directory.mode & 0o1000) !== 0)
	);
}

/** One connection to the daemon, kept between requests (a new one costs ~3 ms, a kept one ~0.3). */
type Link = {
	socket: net.Socket;
	buffer: Buffer;
	dead: boolean;
	// Called with the body of the next frame, or undefined once the connection is gone.
	onFrame?: (body: Buffer | undefined) => void;
};

let idle: Link | undefined; // the connection no request is using, if any

function drop(link: Link): void {
	link.dead = true;
	link.socket.destroy();
	if (idle === link) idle = undefined;
	const waiting = link.onFrame;
	link.onFrame = undefined;
	waiting?.(undefined);
}

function open(path: string): Link {
	const link: Link = { socket: net.createConnection(path), buffer: Buffer.alloc(0), dead: false };
	link.socket.on("error", () => drop(link));
	link.socket.on("close", () => drop(link));
	link.socket.on("data", (chunk: Buffer) => {
		link.buffer = link.buffer.length ? Buffer.concat([link.buffer, chunk]) : chunk;
		if (link.buffer.length < 4) return;
		const length = link.buffer.readUInt32BE(0);
		if (length > MAX_REPLY || !link.onFrame) return drop(link); // too large, or unasked for
		if (link.buffer.length < 4 + length) return;
		const body = link.buffer.subarray(4, 4 + length);
		link.buffer = link.buffer.subarray(4 + length);
		const waiting = link.onFrame;
		link.onFrame = undefined;
		waiting(body);
	});
	return link;
}

/** The body of the daemon's answer on `link`, or undefined when the link died first. */
function exchange(link: Link, frame: Buffer): Promise<Buffer | undefined> {
	return new Promise((resolve) => {
		link.onFrame = resolve;
		link.socket.ref(); // an exchange keeps pi's process alive; an idle link does not
		link.socket.write(frame);
	});
}

/** The daemon's answer to `event`, or undefined: never throws, never waits past the budget. */
async function ask(event: Record<string, unknown>): Promise<Answer | undefined> {
	let link: Link | undefined;
	let timer: ReturnType<typeof setTimeout> | undefined;
	try {
		const budget = budgetMs();
		const started = Date.now();
		const body = Buffer.from(
			JSON.stringify({ type: "hook", agent: AGENT, deadline: started / 1000 + budget / 1000, event }),
		);
		if (body.length > MAX_REQUEST) return undefined;
		const header = Buffer.alloc(4);
		header.writeUInt32BE(body.length);
		const frame = Buffer.concat([header, body]);
		const expired = new Promise<undefined>((resolve) => {
			timer = setTimeout(() => resolve(undefined), budget);
		});
		let reply: Buffer | undefined;
		for (let attempt = 0; attempt < 2 && reply === undefined; attempt++) {
			const kept = idle !== undefined && !idle.dead;
			link = kept ? idle : undefined;
			idle = undefined;
			if (link === undefined) {
				const path = socketPath();
				if (!ownSocket(path)) return undefined;
				link = open(path);
			}
			reply = await Promise.race([exchange(link, frame), expired]);
			if (reply === undefined && !link.dead) return undefined; // the budget ran out
			// A kept connection the daemon closed as idle just then: once more, on a new one.
			if (reply === undefined && (!kept || Date.now() - started >= budget)) return undefined;
		}
		if (link !== undefined && !link.dead) {
			link.socket.unref();
			if (idle === undefined) {
				idle = link;
				link = undefined;
			}
		}
		const text = reply?.toString("utf8");
		// Empty: nothing to say; a typed message (an error from the daemon) is never the agent's.
		if (!text || text.startsWith('{"type":')) return undefined;
		const answer = JSON.parse(text);
		return answer !== null && typeof answer === "object" ? answer : undefined;
	} catch {
		return undefined;
	} finally {
		if (timer !== undefined) clearTimeout(timer);
		if (link !== undefined && link !== idle) drop(link); // not kept: a late answer goes nowhere
	}
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
