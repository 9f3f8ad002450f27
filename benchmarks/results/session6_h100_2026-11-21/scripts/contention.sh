#!/bin/bash
# 12 pytest processes at once, each running the one-launch repeated-launch tests (4096 rows).
for i in $(seq 1 12); do
  timeout -s KILL 120 python -m pytest -p no:cacheprovider -m gpu -q -rfE tests/test_softmax_gpu.py -k "repeated_launches and 4096" > /tmp/cont_$i.log 2>&1 &
done
wait
for i in $(seq 1 12); do echo "== proc $i"; grep -v "^\s*$" /tmp/cont_$i.log | tail -40; done
