"""The trust boundary: everything that crosses between the referee and the learner's kernel.

    execute   runs the repaired notebook in a jailed kernel cell by cell, with deadlines and
              output caps; sends a graded test cell to the referee instead of the kernel, and
              carries the referee's calls to the kernel (one request per test)
    referee   outside the jail: runs the instructor's test cells, calls the learner's
              functions with data, compares with the references and decides every point
    remote    both ends of one call: `RemoteFunction` (referee side) and `serve_calls` (run
              in the kernel: calls the learner's function under the rules, sends data back)
    codec     what may cross: plain data only (tensors as safetensors, numbers, strings,
              containers, configs, modules by state), with size and depth limits; decoding
              never runs code

Nothing the kernel sends is read except through `codec`. The checks the test cells call
(`bertcourse.grading`) are the same in the learner's JupyterLab and under the referee.
"""
