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

// One request, one answer: the answer's JSON, or null (silence) on any failure.
function exchange(env, event) {
  return new Promise((resolve) => {
    let done = false
    let socket = null
    let timer = null
    const finish = (value) => {
      if (done) return
      done = true
      clearTimeout(timer)
      if (socket) socket.destroy()
      resolve(value)
    }
    try {
      const budget = budgetMs(env)
      const path = socketPath(env)
      if (!ownSocket(path)) return finish(null)
      const body = Buffer.from(
        JSON.stringify({
          type: "hook",
          agent: AGENT,
          deadline: Date.now() / 1000 + budget / 1000,
          event,
        }),
      )
      if (body.length > MAX_EVENT) return finish(null)
      timer = setTimeout(() => finish(null), budget)
      const header = Buffer.alloc(4)
      header.writeUInt32BE(body.length)
      let received = Buffer.alloc(0)
      socket = createConnection({ path })
      socket.on("error", () => finish(null))
      socket.on("close", () => finish(null))
      socket.on("connect", () => {
        try {
          socket.write(Buffer.concat([header, body]))
        } catch {
          finish(null)
        }
      })
      socket.on("data", (chunk) => {
        // An exception in a socket's handler would escape this promise, into opencode.
        try {
          received = Buffer.concat([received, chunk])
          if (received.length < 4) return
          const length = received.readUInt32BE(0)
          if (length > MAX_REPLY) return finish(null)
          if (received.length < 4 + length) return
          finish(answerOf(received.subarray(4, 4 + length)))
        } catch {
          finish(null)
        }
      })
    } catch {
      finish(null)
    }
  })
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
        if (rules) output.system.push(rules)
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
