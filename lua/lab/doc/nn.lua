-- Docstrings of lab.nn (help(lab.nn.Module.to)): lua/lab/nn.lua. Module.* are the methods
-- every module has (m:to('sim'), m:parameters()).
return {
  class = "lab.nn.class(name[, parent]) -> class: a new module class; Class(...) calls Class.new(self, ...)",
  is_module = "lab.nn.is_module(m) -> boolean: true for an instance of any lab.nn module class",
  check_module = "lab.nn.check_module(m, op): raises a named error unless m is a module",
  linear = "lab.nn.linear(x, weight[, bias]) -> tensor: x W^T + b, the GEMM every linear layer computes through",
  ["Module.init"] = "Module:init(): sets up the parameter and child tables (called by constructors)",
  ["Module.param"] = "Module:param(name, t) -> t: registers t as a trainable parameter",
  ["Module.buffer"] = "Module:buffer(name, t) -> t: registers t as state that is saved but not trained",
  ["Module.add"] = "Module:add(name, m) -> m: registers a child module",
  ["Module.children"] = "Module:children() -> list: the child modules in registration order",
  ["Module.forward"] = "Module:forward(...) -> output: the computation (m(...) calls it); classes define it",
  ["Module.parameters"] = "Module:parameters() -> {tensor}: every parameter, children's included, once each",
  ["Module.named_parameters"] = "Module:named_parameters([prefix]) -> {{name, tensor}}: parameters with dotted names",
  ["Module.num_parameters"] = "Module:num_parameters() -> integer: the number of parameter elements",
  ["Module.state_dict"] = "Module:state_dict([prefix]) -> {name = tensor}: parameters and buffers",
  ["Module.load_state_dict"] = "Module:load_state_dict(sd[, strict=true]): copies values in by name",
  ["Module.zero_grad"] = "Module:zero_grad(): clears every parameter's gradient",
  ["Module.train"] = "Module:train([mode=true]) -> self: training mode (dropout on), children too",
  ["Module.eval"] = "Module:eval() -> self: evaluation mode (dropout off), children too",
  ["Module.to"] = "Module:to(device) -> self: moves parameters and buffers to the device in place",
}
