"""Dump PTX and SASS of the long-row softmax kernels (default configs)."""
import os
import torch
from flashtune.gen import load_variant
from flashtune.gen.softmax_space import OPS, SoftmaxProblem, default_config

OUT = os.environ.get("OUT", "/tmp")
S = OPS["softmax"].space
for shape, kw, tag in [((128, 262144), {}, "persistent"), ((1024, 65536), {}, "online_lane"),
                       ((1024, 65536), dict(block=16384, lane_stats=False), "online_nolane")]:
    raw = dict(default_config("softmax", SoftmaxProblem(*shape, "float16"))); raw.update(kw)
    cfg = S.validate(raw)
    mod = load_variant("softmax", cfg)
    x = torch.randn(*shape, device="cuda", dtype=torch.float16); y = torch.empty_like(x)
    mod.launch(x, y); torch.cuda.synchronize()
    for name in dir(mod):
        obj = getattr(mod, name)
        if hasattr(obj, "device_caches"):
            for dev, cache in obj.device_caches.items():
                for key, ck in cache[0].items():
                    for kind in ("ptx", "sass"):
                        try:
                            text = ck.asm[kind]
                        except Exception as e:
                            text = f"unavailable: {e}"
                        with open(os.path.join(OUT, f"{tag}_{name}.{kind}"), "w") as f:
                            f.write(text)
                    print(tag, name, "n_regs", getattr(ck, "n_regs", None), "spills", getattr(ck, "n_spills", None), flush=True)
