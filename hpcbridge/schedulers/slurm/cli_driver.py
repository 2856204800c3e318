"""The Slurm CLI driver: Slurm's commands (``commands``, ``queries``, ``cluster``) run by
the engine's runner through an executor (local or SSH), as rows of the shared glue
(``driver_base``).  The pyslurm driver (``native_driver``) overrides some of them:
``_live``, ``_history`` and ``_send``."""

from __future__ import annotations

import functools
import logging
from typing import Collection, Dict, List, Optional, Sequence

from ...engine.driver import Planned, SubmitBatch
from ...engine.runner import CHUNK
from . import cluster, commands, options, queries
from .commands import SubmitSpec, plan_batch, planned_spec
from .driver_base import SlurmDriverBase
from .queries import Statuses

log = logging.getLogger("hpcbridge.slurm")

#: seconds a history (sacct) is looked into for a lost submission's key
KEY_HISTORY = "now-3600"


class SlurmCliDriver(SlurmDriverBase):
    """Slurm through its commands."""

    name = "cli"

    # -- the table: what this driver sends for each question ----------------------

    def _live(self, ids: List[str]) -> Statuses:
        """The queue's statuses (squeue); where squeue has ``--only-job-state``, the full
        fields only of the jobs whose state changed since the last round."""
        states = None
        # A cold round (nothing known yet) needs every job's full fields: no light one.
        if self._last and self._light():
            try:
                states = self.runner.ask_each(queries.squeue_state_argv, ids, queries.states_reply)
            except queries.NoAnswer:
                states = None  # every job's full fields
        answers, to_ask = queries.light_round(ids, self._last, states)
        if to_ask:
            size = queries.squeue_chunk(to_ask, CHUNK)  # many ids: one squeue --me
            answers.update(
                self.runner.ask_each(queries.squeue_argv, to_ask, queries.squeue_reply, size=size)
            )
        return answers

    def _by_id(self, ids: List[str]) -> Statuses:
        """The queue's statuses of ``ids``, asked by their ids."""
        argv = queries.squeue_argv(ids, by_id=True)
        return self.runner.ask(argv, lambda reply: queries.squeue_reply(reply, ids))

    def _history(self, asked: List[str], wanted: List[str]) -> Statuses:
        """What sacct remembers of ``asked``: the statuses of the ``wanted`` ids it has."""
        return self.runner.ask(queries.sacct_argv(asked), lambda r: queries.sacct_reply(r, wanted))

    def _send(self, spec: SubmitSpec) -> str:
        """One sbatch; its job id (a lost answer adopted by the spec's key)."""
        argv = commands.sbatch_argv(spec)
        parse = functools.partial(commands.sbatch_reply, argv, self.executor.host)
        return self.runner.submit(
            argv, parse, key=spec.key, find=self.find_keys, settle=self.settle
        )

    # -- submit ------------------------------------------------------------------

    def plan(self, batch: SubmitBatch) -> Planned:
        if batch.resources.native_options("slurm"):
            options.check_native(batch.resources, self.option_names(), self.executor.host)
        return plan_batch(batch)

    def option_names(self) -> Optional[Dict[str, str]]:
        """The option names of the running sbatch, from its ``--help`` (read once);
        ``None`` where it cannot be read (then sbatch itself judges a native option)."""
        if self._option_names is None:
            reply = self.runner.run(["sbatch", "--help"])
            self._option_names = cluster.options_reply(reply, self.executor.host)
        return self._option_names or None

    def describe(self, planned: Planned) -> str:
        return commands.describe_argv(commands.sbatch_argv(planned_spec(planned)))

    def find_keys(self, keys: Collection[str]) -> Dict[str, str]:
        """key -> the job carrying it, from squeue, else from sacct (an ended job that left
        the queue: Slurm keeps its comment with ``AccountingStoreFlags=job_comment``)."""
        found = self.runner.ask(queries.key_argv(), lambda reply: queries.keys_reply(reply, keys))
        if len(found) < len(keys):
            history = self.runner.run(queries.sacct_key_argv(KEY_HISTORY))
            found = {**queries.history_keys_reply(history, keys), **found}
        return found

    # -- the cap on queued jobs ----------------------------------------------------

    def _read_queue_limit(self, account: Optional[str] = None) -> Optional[int]:
        user = self.runner.run(["id", "-un"])  # the login the association is kept under
        assoc = self.runner.run(cluster.assoc_argv(user.stdout.strip())) if user.ok else user
        qos = self.runner.run(cluster.qos_argv()) if assoc.ok else None
        return cluster.caps_reply(assoc, qos, self.config().get("ClusterName"), account)

    # -- status ------------------------------------------------------------------

    def _light(self) -> bool:
        """Whether this Slurm has ``squeue --only-job-state`` (asked once)."""
        if self._has_light is None:
            parsed = cluster.parse_version(self.version() or "")
            self._has_light = parsed is not None and parsed >= queries.ONLY_JOB_STATE_SINCE
        return self._has_light

    # -- cancel, logs, config ------------------------------------------------------

    def cancel(self, job_ids: Sequence[str]) -> None:
        """scancel; a job that ended meanwhile or was purged is no failure."""
        if job_ids:
            commands.cancel_reply(self.runner.run(commands.scancel_argv(job_ids)))

    def find_output(self, job_id: str) -> Optional[str]:
        """Where a job without a record writes its output (while Slurm knows it)."""
        argv = ["scontrol", "--oneliner", "show", "job", job_id]
        return cluster.output_reply(self.runner.run(argv))

    def config(self) -> Dict[str, str]:
        """``scontrol show config`` (read once); empty when it cannot be read."""
        if self._config is None:
            self._config = cluster.config_reply(self.runner.run(["scontrol", "show", "config"]))
        return self._config or {}

    def version(self) -> Optional[str]:
        """Slurm's version as ``scontrol --version`` prints it, e.g. 22.05.8."""
        return cluster.version_reply(self.runner.run(["scontrol", "--version"]))
