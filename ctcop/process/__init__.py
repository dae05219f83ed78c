"""Process plumbing: crash-isolated worker processes (:mod:`.workers`), a worker's peak memory
(:mod:`.memory_probe`), this process's memory limits (:mod:`.limits`), native libraries' stderr
(:mod:`.native_stderr`), usable CPUs (:mod:`.cpus`) and the frameworks' versions (:mod:`.frameworks`)."""
