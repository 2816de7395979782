-- sorted_keys(t) -> list: the keys of t in sorted order. pairs() visits keys in an order that
-- differs between runs and ranks; what is printed, written or compared across ranks walks
-- this list instead, so every rank and every run sees the same order.
return function(t)
  local keys = {}
  for k in pairs(t) do keys[#keys + 1] = k end
  table.sort(keys)
  return keys
end
