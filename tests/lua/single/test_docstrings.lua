-- Every public function of lab has a docstring (lua/lab/doc/<namespace>.lua) that starts with
-- its signature and says in one line what it does; help(f) shows it. So do the constructors of
-- the classes (lab.nn.Linear, lab.tp.ColumnParallelLinear: help(lab.nn.Linear)) and the tensor
-- methods (lab.Tensor.sum, doc/tensor.lua: help(t.sum)). Fails naming each one without one, and
-- each docstring whose function no longer exists.
-- Run: build/llmlab tests/lua/single/test_docstrings.lua
local help = require("lab.help")
local _, names = help.public_functions()
local missing, bad = {}, {}
local known = {}
for _, path in ipairs(names) do
  known[path] = true
  local d = help.doc_of(path)
  local short = path:gsub("^lab%.nn%.Module%.", "Module:"):gsub("^lab%.Tensor%.", "Tensor:")
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
  "moe", "netsim", "plan_presets", "posttrain", "pp", "prof", "tp", "train", "zero", "plot", "fault", "monitor", "plan", "replicas", "sim",
  "tensor" }) do
  local docs = dofile(dir .. "/" .. ns .. ".lua")
  for key in pairs(docs) do
    local path = ns == "core" and "lab." .. key or ns == "tensor" and "lab.Tensor." .. key or "lab." .. ns .. "." .. key
    if not known[path] then stale[#stale + 1] = path end
  end
end
table.sort(stale)
if #missing + #bad + #stale > 0 then
  error(string.format("%d public functions without a docstring:\n  %s\n%d docstrings not 'signature: one line':\n  %s\n" ..
    "%d docstrings of no function:\n  %s", #missing, table.concat(missing, "\n  "), #bad, table.concat(bad, "\n  "),
    #stale, table.concat(stale, "\n  ")))
end
assert(#names > 150, "the walk of lab found only " .. #names .. " functions")
-- help shows the docstring under the function's name, from the function itself
local text = help.text(lab.dist.all_reduce)
assert(text:find("^lab%.dist%.all_reduce\n  lab%.dist%.all_reduce%(t"), text)
assert(help.text(lab.dist):find("all_reduce", 1, true))
assert(help.text(nil, "lab.nope"):find("lab.nope is nil", 1, true))
assert(help.text(nil):find("^help: the value given is nil"), help.text(nil))
-- the classes' constructors and the tensor methods are enumerated, and help shows them
local classes, methods, n_methods = {}, getmetatable(lab.ones(1)).methods, 0
for _, path in ipairs(names) do
  if path:find("^lab%.Tensor%.") then n_methods = n_methods + 1 end
  local v = lab
  for part in path:gmatch("[^.]+") do if part ~= "lab" then v = v[part] end end
  if help.is_class(v) then classes[#classes + 1] = path end
end
for k in pairs(methods) do assert(known["lab.Tensor." .. k], "tensor method " .. k .. " is not enumerated") end
assert(#classes >= 24 and known["lab.nn.Linear"] and known["lab.tp.ColumnParallelLinear"] and known["lab.cp.GPT"],
  #classes .. " classes: " .. table.concat(classes, " "))
text = help.text(lab.nn.Linear)
assert(text:find("^lab%.nn%.Linear\n  lab%.nn%.Linear%(in, out") and text:find("methods: .*forward") and
  text:find("lab.nn.Module", 1, true), text)
text = help.text(lab.ones(1).sum)
assert(text:find("^lab%.Tensor%.sum\n  Tensor:sum%("), text)
assert(help.text(lab.ones(1).matmul):find("^lab%.matmul\n"), "t.matmul is lab.matmul")
assert(help.text(lab.Tensor):find("^lab%.Tensor:\n") and help.text(lab.Tensor):find("\n  Tensor:sum%("), help.text(lab.Tensor))
print(string.format("%d public functions, each with a docstring (%d class constructors, %d tensor methods)", #names,
  #classes, n_methods))
