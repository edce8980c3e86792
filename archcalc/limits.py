"""Upper bounds of the counts every command and API function takes (cli/ and api.py check the same).

A count beyond these is a typo, not a deployment; without them a 400-digit --context overflows a float
deep inside the cost model (a traceback) and --batch 10**30 prints numbers nobody can mean.
"""

MAX_CONTEXT = 2**31  # tokens per sequence (also --prompt, --gen, prompt + gen): 200x the longest context a
#                      published model is trained for (~10M); int32 positions, what engines index with, end here
MAX_BATCH = 2**24  # sequences: ~16M, thousands of times any engine's concurrent sequences (vLLM: 256 default)
MAX_GPUS = 2**20  # GPUs (also --tp, a number of GPUs): ~1M, several times the largest cluster built (~200k)
MAX_TOKENS_PER_STEP = MAX_CONTEXT  # --max-num-batched-tokens, --ubatch: tokens of one step, at most a context
MAX_SAMPLES = 100_000_000  # sweep --samples and --top: the grid cap (search/space.py MAX_GRID), same memory
MAX_REPEATS = 1000  # --repeats: each times every op of a step; the median is steady after tens
MAX_SEED = 2**64 - 1  # --seed: numpy takes any non-negative int; a 64-bit word is all a seed needs
