-- Where the daemon's socket is, found the way mented itself finds it
-- (mented/paths.py): the setup option, else $MENTED_SOCKET, else
-- $XDG_RUNTIME_DIR/mented/mented.sock, else ${TMPDIR:-/tmp}/mented-$UID/mented.sock.
-- On macOS there is no XDG_RUNTIME_DIR and TMPDIR is the per-user folder, so the
-- same rule gives the daemon's path there too.
local uv = vim.uv or vim.loop

local M = {}

local function env(name)
  local value = uv.os_getenv(name)
  if value == nil or value == "" then
    return nil
  end
  return value
end

-- Python's Path joins "/var/folders/x/T/" and "mented-501" with one slash.
local function join(dir, name)
  return (dir:gsub("/+$", "")) .. "/" .. name
end

--- The socket path: `explicit` (from setup), else the environment, else the default.
function M.socket(explicit)
  if explicit and explicit ~= "" then
    return vim.fn.expand(explicit)
  end
  local from_env = env("MENTED_SOCKET")
  if from_env then
    return from_env
  end
  local runtime = env("XDG_RUNTIME_DIR")
  if runtime then
    return join(join(runtime, "mented"), "mented.sock")
  end
  local tmp = env("TMPDIR") or "/tmp"
  return join(join(tmp, "mented-" .. uv.getuid()), "mented.sock")
end

return M
