// mented plugin for opencode
// Installed by `mentectl hooks install`, which writes AGENT and FALLBACK_SOCKET below;
// `mentectl hooks uninstall` removes this file. Do not edit: an install replaces it.
//
// Before each tool call it hands the call to the mented daemon on its Unix socket (the
// protocol of mented/protocol.py, as the hook shim speaks it: one length-prefixed JSON
// frame each way) and, when the daemon stops the call, throws: opencode then gives the
// model the rules as the tool's error, and the call does not run. After a call, the
// daemon's context is appended to the tool's output. Pinned rules go into the system
// prompt of every request of a session. The shapes are in mented/agents/opencode.py.
//
// Whatever goes wrong (no daemon, a socket of another user, a daemon that hangs past the
// deadline, a garbled answer, a bug here) it does nothing and the tool runs: it never
// throws but for a stop, never approves or changes a call, and starts no process.
const PLUGIN_PROTOCOL = 1
const AGENT = "opencode"
const FALLBACK_SOCKET = null

import { createConnection } from "node:net"
import { lstatSync } from "node:fs"
import { dirname } from "node:path"

const DEFAULT_BUDGET_MS = 250
const MAX_BUDGET_MS = 10000
const MAX_EVENT = 1 << 20 // as the shim's stdin: a bigger call is nothing we can help with
const MAX_REPLY = 1 << 20
const MAX_SESSIONS = 256 // sessions whose pinned rules are kept, oldest dropped
const IDLE_MS = 30000
const EMPTY = Buffer.alloc(0)
// Which copy of the plugin added the pinned rules to a request's system prompt (shared
// by every copy opencode loaded in this process).
const SYSTEM_OWNERS = Symbol.for("mented.plugin.system")

function budgetMs(env) {
  const millis = Number.parseInt(env.MENTED_HOOK_BUDGET_MS ?? "", 10)
  return Number.isFinite(millis) && millis > 0 ? Math.min(millis, MAX_BUDGET_MS) : DEFAULT_BUDGET_MS
}

function socketPath(env) {
  if (env.MENTED_SOCKET) return env.MENTED_SOCKET
  if (FALLBACK_SOCKET) return FALLBACK_SOCKET
  if (env.XDG_RUNTIME_DIR) return env.XDG_RUNTIME_DIR.replace(/\/+$/, "") + "/mented/mented.sock"
  const tmp = (env.TMPDIR || "/tmp").replace(/\/+$/, "")
  return `${tmp}/mented-${process.getuid()}/mented.sock`
}

// The call goes only to a daemon of this user. Node has no SO_PEERCRED: the socket
// must be ours, in a directory that is ours and that nobody else may write to (so
// that nobody else can put a socket of theirs there).
function ownSocket(path) {
  const uid = process.getuid()
  const socket = lstatSync(path)
  const folder = lstatSync(dirname(path))
  return (
    socket.isSocket() && socket.uid === uid &&
    folder.isDirectory() && folder.uid === uid && (folder.mode & 0o022) === 0
  )
}

// One connection to the daemon, kept open between calls (a connect and the daemon's
// accept cost more than the request itself), carrying one request at a time in order:
// the daemon answers a connection's requests one after the other. Whatever goes wrong
// on it (an error, a close, a late or oversized answer) ends it, and every call waiting
// on it gets null; the next call opens a new one, checking the socket's owner again.
class Channel {
  constructor() {
    this.socket = null
    this.received = EMPTY
    this.waiting = [] // resolve functions, oldest first
    this.lastUsed = 0
  }

  close() {
    const waiting = this.waiting
    this.waiting = []
    if (this.socket) this.socket.destroy()
    this.socket = null
    this.received = EMPTY
    for (const resolve of waiting) resolve(null)
  }

  open(path) {
    if (!ownSocket(path)) return false
    const socket = createConnection({ path })
    socket.on("error", () => this.socket === socket && this.close())
    socket.on("close", () => this.socket === socket && this.close())
    socket.on("data", (chunk) => {
      // An exception in a socket's handler would escape into opencode.
      try {
        // Most answers come whole in one chunk: taken as it is, not copied.
        this.received = this.received.length === 0 ? chunk : Buffer.concat([this.received, chunk])
        while (this.received.length >= 4) {
          const length = this.received.readUInt32BE(0)
          if (length > MAX_REPLY) return this.close()
          if (this.received.length < 4 + length) return
          const body = this.received.subarray(4, 4 + length)
          const rest = this.received.subarray(4 + length)
          this.received = rest.length === 0 ? EMPTY : Buffer.from(rest) // a copy: the chunk is not kept
          const resolve = this.waiting.shift()
          let answer = null
          let garbled = false
          try {
            answer = answerOf(body)
          } catch {
            garbled = true
          }
          if (resolve) resolve(answer)
          if (garbled) return this.close()
          // An idle connection must not keep opencode running once it is done. (Only
          // while idle: Bun polls an unref'd socket late, 4 ms a call instead of 0.4.)
          if (this.waiting.length === 0) socket.unref()
        }
      } catch {
        this.close()
      }
    })
    this.socket = socket
    this.path = path
    return true
  }

  // The answer's JSON, or null (silence) on any failure or past the deadline.
  request(env, event) {
    return new Promise((resolve) => {
      let timer = null
      let settled = false
      const settle = (value) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        resolve(value)
      }
      try {
        const budget = budgetMs(env)
        const path = socketPath(env)
        const json = JSON.stringify({
          type: "hook",
          agent: AGENT,
          deadline: Date.now() / 1000 + budget / 1000,
          event,
        })
        // The frame in one buffer: its 4-byte length, then the body written in place.
        const size = Buffer.byteLength(json)
        if (size > MAX_EVENT) return settle(null)
        const frame = Buffer.allocUnsafe(4 + size)
        frame.writeUInt32BE(size, 0)
        frame.write(json, 4)
        // The daemon closes a connection idle for a minute ([daemon] connection_idle_s):
        // one idle for half of that is not trusted to carry the next call.
        const stale = Date.now() - this.lastUsed > IDLE_MS
        if (this.socket && (stale || this.path !== path)) this.close()
        if (!this.socket && !this.open(path)) return settle(null)
        this.lastUsed = Date.now()
        // A late answer would be taken for the next call's: the connection goes with it.
        timer = setTimeout(() => {
          this.close()
          settle(null)
        }, budget)
        this.waiting.push(settle)
        this.socket.ref()
        this.socket.write(frame)
      } catch {
        this.close()
        settle(null)
      }
    })
  }
}

function answerOf(bytes) {
  if (bytes.length === 0) return {}
  const answer = JSON.parse(bytes.toString("utf8"))
  // A typed daemon message (an error of an older daemon) is nothing to act on.
  if (answer === null || typeof answer !== "object" || "type" in answer) return null
  return answer
}

// Only what the daemon reads of the tool's arguments: never a file's content.
function callArgs(args) {
  if (args === null || typeof args !== "object") return {}
  const picked = {}
  for (const key of ["command", "workdir", "filePath", "patchText"]) {
    if (typeof args[key] === "string") picked[key] = args[key]
  }
  return picked
}

function toolEvent(name, input, args, cwd) {
  return {
    hook_event_name: name,
    plugin: PLUGIN_PROTOCOL,
    session_id: input?.sessionID,
    call_id: input?.callID,
    cwd,
    tool: input?.tool,
    args: callArgs(args),
  }
}

function text(value) {
  return typeof value === "string" && value.length > 0 ? value : null
}

export const MentedPlugin = async (ctx) => {
  const env = process.env
  const cwd = typeof ctx?.directory === "string" ? ctx.directory : process.cwd()
  const pinned = new Map() // session -> the pinned rules' text ("" for none)
  const channel = new Channel()
  const exchange = (env, event) => channel.request(env, event)
  const copy = Symbol("this copy of the plugin")
  return {
    "tool.execute.before": async (input, output) => {
      let stop = null
      try {
        const answer = await exchange(env, toolEvent("tool.execute.before", input, output?.args, cwd))
        stop = text(answer?.stop)
      } catch {
        stop = null
      }
      if (stop !== null) throw new Error(stop)
    },
    "tool.execute.after": async (input, output) => {
      try {
        const args = input?.args ?? {}
        const answer = await exchange(env, toolEvent("tool.execute.after", input, args, cwd))
        const context = text(answer?.context)
        if (context !== null && typeof output?.output === "string") {
          output.output = `${output.output}\n\n${context}`
        }
      } catch {}
    },
    "experimental.chat.system.transform": async (input, output) => {
      try {
        const session = input?.sessionID
        if (typeof session !== "string" || !Array.isArray(output?.system)) return
        if (!pinned.has(session)) {
          const answer = await exchange(env, {
            hook_event_name: "session.start",
            plugin: PLUGIN_PROTOCOL,
            session_id: session,
            cwd,
          })
          if (answer === null) return // asked again at the next request
          pinned.set(session, text(answer.system) ?? "")
          if (pinned.size > MAX_SESSIONS) pinned.delete(pinned.keys().next().value)
        }
        const rules = pinned.get(session)
        // opencode loads every plugin file it finds: a user's and a project's install of
        // this plugin both run, on the same request. The first to add the rules to a
        // request's system prompt is the one that does; another copy adds nothing there.
        const owners = (globalThis[SYSTEM_OWNERS] ??= new WeakMap())
        if (!owners.has(output.system)) owners.set(output.system, copy)
        if (rules && owners.get(output.system) === copy) output.system.push(rules)
      } catch {}
    },
    event: async ({ event }) => {
      try {
        const session = event?.properties?.sessionID
        if (event?.type !== "session.compacted" || typeof session !== "string") return
        await exchange(env, {
          hook_event_name: "session.compacted",
          plugin: PLUGIN_PROTOCOL,
          session_id: session,
        })
      } catch {}
    },
  }
}
