-- The project a buffer belongs to: the git root of its file, else the file's
-- directory, else Neovim's working directory. Paths are resolved through symlinks,
-- as mentectl and the daemon resolve a rule's project and the agent's directory,
-- so that the rules listed are the ones the agent gets there.
local uv = vim.uv or vim.loop

local M = {}

local roots = {} -- directory -> its project, found once
local by_name = {} -- buffer name -> its project

local function is_dir(path)
  local stat = uv.fs_stat(path)
  return stat ~= nil and stat.type == "directory"
end

local function parent(dir)
  local up = dir:match("^(.*)/[^/]*$")
  if up == nil or up == "" then
    return "/"
  end
  return up
end

--- The git root at or above `dir` (a `.git` directory, or file in a worktree), else `dir`.
function M.root_of(dir)
  if roots[dir] then
    return roots[dir] -- asked on every statusline redraw: no system call then
  end
  local given = dir
  dir = uv.fs_realpath(dir) or dir
  local probe = dir
  local root = dir
  while true do
    if uv.fs_stat(probe .. (probe == "/" and "" or "/") .. ".git") then
      root = probe
      break
    end
    if probe == "/" then
      break
    end
    probe = parent(probe)
  end
  roots[given] = root
  roots[dir] = root
  return root
end

--- The project of buffer `buf` (default: the current one).
function M.of_buffer(buf)
  buf = buf or vim.api.nvim_get_current_buf()
  -- The rules buffer and the rule editor belong to the project they show.
  local ok, shown = pcall(vim.api.nvim_buf_get_var, buf, "mented_project")
  if ok and type(shown) == "string" then
    return shown
  end
  local name = vim.api.nvim_buf_get_name(buf)
  if name ~= "" and vim.bo[buf].buftype == "" and not name:match("^%a[%w+.-]*://") then
    if by_name[name] then
      return by_name[name]
    end
    local dir = vim.fn.fnamemodify(name, ":p:h")
    while dir ~= "/" and not is_dir(dir) do
      dir = parent(dir) -- a new file in a directory not created yet
    end
    if is_dir(dir) then
      by_name[name] = M.root_of(dir)
      return by_name[name]
    end
  end
  return M.root_of(vim.fn.getcwd())
end

--- Forget the roots found, e.g. after `git init`.
function M.forget()
  roots = {}
  by_name = {}
end

return M
