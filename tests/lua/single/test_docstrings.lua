-- Every public function of lab has a docstring (lua/lab/doc/<namespace>.lua) that starts with
-- its signature and says in one line what it does; help(f) shows it. Fails naming each
-- function without one, and each docstring whose function no longer exists.
-- Run: build/llmlab tests/lua/single/test_docstrings.lua
local help = require("lab.help")
local _, names = help.public_functions()
local missing, bad = {}, {}
local known = {}
for _, path in ipairs(names) do
  known[path] = true
  local d = help.doc_of(path)
  local short = path:gsub("^lab%.nn%.Module%.", "Module:")
  if not d then
    missing[#missing + 1] = path
  elseif not (d:find(path .. "(", 1, true) == 1 or d:find(short .. "(", 1, true) == 1 or d:find(path .. "{", 1, true) == 1)
      or not d:find(": ", 1, true) or d:find("\n") then
    bad[#bad + 1] = path .. " -> " .. d
  end
end
-- the other way round: a docstring left behind by a renamed function
local dir = package.searchpath("lab.help", package.path):gsub("help%.lua$", "doc")
local stale = {}
for _, ns in ipairs({ "core", "dist", "autograd", "cuda", "mem", "nn", "optim", "amp", "ckpt", "cp", "data", "ddp", "lora",
  "moe", "netsim", "plan_presets", "posttrain", "pp", "prof", "tp", "train", "zero", "plot", "fault", "monitor", "plan", "replicas", "sim" }) do
  local docs = dofile(dir .. "/" .. ns .. ".lua")
  for key in pairs(docs) do
    local path = ns == "core" and "lab." .. key or "lab." .. ns .. "." .. key
    if not known[path] then stale[#stale + 1] = path end
  end
end
table.sort(stale)
assert(#names > 150, "the walk of lab found only " .. #names .. " functions")
-- help shows the docstring under the function's name, from the function itself
local text = help.text(lab.dist.all_reduce)
assert(text:find("^lab%.dist%.all_reduce\n  lab%.dist%.all_reduce%(t"), text)
assert(help.text(lab.dist):find("all_reduce", 1, true))
assert(help.text(nil, "lab.nope"):find("lab.nope is nil", 1, true))
if #missing + #bad + #stale > 0 then
  error(string.format("%d public functions without a docstring:\n  %s\n%d docstrings not 'signature: one line':\n  %s\n" ..
    "%d docstrings of no function:\n  %s", #missing, table.concat(missing, "\n  "), #bad, table.concat(bad, "\n  "),
    #stale, table.concat(stale, "\n  ")))
end
print(string.format("%d public functions, each with a docstring", #names))
