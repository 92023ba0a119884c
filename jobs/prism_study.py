"""Ray job entrypoint: a whole PRISM study (collect -> fit -> evaluate -> report).

    ray job submit --address http://HEAD:8265 --working-dir . -- python jobs/prism_study.py CONFIG.toml

Inside a job, ``ray.init()`` attaches to the cluster that runs it (RAY_ADDRESS is set).
"""

import sys

from judgecal.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
