"""`vitperf ab`: a candidate environment measured against the current one, process by process, in turns on a GPU.

Its plan (what each process runs), turns (one process on the GPU at a time), GPUs (the suite's units over several),
explanation (the kernels a verdict moved) and report (table, markdown, JSON, the store). The verdicts are
verdicts/ab.py's; the command's arguments are cli/ab.py's.
"""
