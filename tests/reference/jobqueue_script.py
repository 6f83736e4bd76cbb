"""The job script dask-jobqueue writes for the options given as JSON
(tests/slurm.rs compares brisk's with it, line by line)."""
import json
import logging
import sys

logging.disable(logging.CRITICAL)
from dask_jobqueue.lsf import LSFJob  # noqa: E402
from dask_jobqueue.pbs import PBSJob  # noqa: E402
from dask_jobqueue.slurm import SLURMJob  # noqa: E402

spec = json.loads(sys.argv[1])
cls = {"slurm": SLURMJob, "pbs": PBSJob, "lsf": LSFJob}[spec.pop("system")]
spec.setdefault("job_name", "brisk-worker")
job = cls(scheduler="tcp://SCHEDULER:8786", name="brisk-worker", **spec)
print(job.job_script())
