import json, itertools
from flashtune.gen.softmax_space import SoftmaxProblem, default_config
SHAPES = [(65536, 128), (16384, 1024), (8192, 4096), (4096, 16384), (1024, 65536), (128, 262144), (16, 1048576), (4096, 50257)]
out = {}
for (r, c), dt in itertools.product(SHAPES, ("float16", "bfloat16", "float32")):
    out[f"{r}x{c} {dt}"] = dict(default_config("softmax", SoftmaxProblem(r, c, dt)).as_dict())
print(json.dumps(out))
