"""``delayline cluster``: a Spark standalone cluster on this machine (up, down, status).
The scheduler's runtime loads inside each command: the client's commands start
without it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from delayline.defaults import DEFAULT_DATA_DIR

#: Where ``delayline cluster`` keeps its record, logs and work directories.
DEFAULT_CLUSTER_DIR = DEFAULT_DATA_DIR / "cluster"

cluster_dir_option = click.option(
    "--dir",
    "directory",
    type=click.Path(path_type=Path),
    default=DEFAULT_CLUSTER_DIR,
    show_default=True,
    help="The cluster's record, logs and work directories.",
)


@click.group()
def cluster() -> None:
    """A Spark standalone cluster on this machine: a Master and Workers, from the
    spark-class that pyspark ships.

    \b
    Example:
      delayline cluster up --workers 2
      delayline run --master spark://127.0.0.1:7077 --redis-url redis://127.0.0.1:6379/0
      delayline cluster down
    """


@cluster.command("up")
@cluster_dir_option
@click.option("--host", default="127.0.0.1", show_default=True, help="Address of every process.")
@click.option("--port", default=7077, show_default=True, help="The Master's port.")
@click.option("--webui-port", default=8080, show_default=True, help="The Master's web UI port.")
@click.option("--workers", type=click.IntRange(1), default=2, show_default=True)
@click.option("--cores", type=click.IntRange(1), default=1, show_default=True,
              help="Cores each Worker offers.")  # fmt: skip
@click.option("--memory", default="1g", show_default=True, help="Memory each Worker offers.")
@click.option("--nice", "niceness", type=click.IntRange(0, 19), default=10, show_default=True,
              help="How much nicer the cluster runs than Redis and the pump on this machine "
                   "(0 on a machine of its own).")  # fmt: skip
def cluster_up(directory: Path, **spec: Any) -> None:
    """Start the Master and the Workers, and wait until every Worker is alive."""
    from delayline.scheduler.runtime import standalone  # here: the client commands start without it

    running = standalone.up(standalone.ClusterSpec(directory, **spec))
    click.echo(f"master    {running.master_url}")
    each = f"{spec['cores']} core(s) and {spec['memory']}"
    click.echo(f"workers   {spec['workers']}, each with {each}")
    click.echo(f"web ui    {running.webui_url}")
    click.echo(f"run       delayline run --master {running.master_url} --redis-url ...")
    click.echo(f"stop      delayline cluster down --dir {directory}")


@cluster.command("down")
@cluster_dir_option
def cluster_down(directory: Path) -> None:
    """Stop the cluster started from --dir, its executors too."""
    from delayline.scheduler.runtime import standalone

    click.echo(f"stopped   {standalone.down(directory)} processes")


@cluster.command("status")
@cluster_dir_option
def cluster_status(directory: Path) -> None:
    """What the Master says: its state, the Workers alive, cores in use, applications."""
    from delayline.scheduler.runtime import standalone

    running = standalone.RunningCluster.recorded_in(directory)
    state = running.state()
    apps = ", ".join(app.get("name", "?") for app in state.get("activeapps", [])) or "none"
    click.echo(f"master    {running.master_url} ({state.get('status')})")
    click.echo(f"workers   {state.get('aliveworkers')} alive")
    click.echo(f"cores     {state.get('coresused')} of {state.get('cores')} in use")
    click.echo(f"apps      {apps}")
