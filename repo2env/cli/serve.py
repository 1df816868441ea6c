"""``repo2env serve``: a published dataset's environments over OpenEnv's protocol."""

from __future__ import annotations

from pathlib import Path

import click

from repo2env.cli.root import cli, console


@cli.command()
@click.option("--dataset", "dataset_dir", required=True, type=click.Path(exists=True, file_okay=False, path_type=Path),
              help="A folder 'repo2env publish --to DIR' wrote.")
@click.option("--split", help="Serve only this split [default: every split].")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--max-sessions", default=8, show_default=True, type=click.IntRange(1),
              help="Concurrent WebSocket sessions (one sandbox each).")
def serve(dataset_dir: Path, split: str | None, host: str, port: int, max_sessions: int) -> None:
    """Serve a published dataset's environments over OpenEnv's protocol (HTTP /reset /step /state
    /health /schema, WebSocket /ws, MCP /mcp), the tools as MCP tools. Needs the 'openenv' extra and
    the tasks' images on this engine. Grading logs go to REPO2ENV_ENV_LOGS_DIR (default: under
    ~/.cache/repo2env), never into the current folder.

    \b
    reset:  {"task_id": ID} (or a seed, or nothing: the next task in turn)
    step:   {"type": "call_tool", "tool_name": "bash", "arguments": {"command": "ls"}}, ...
            then {"type": "call_tool", "tool_name": "submit"} -> reward, done
    """
    from repo2env.envs.catalog import TaskCatalog
    from repo2env.envs.openenv_server import serve as serve_openenv

    catalog = TaskCatalog.from_published(dataset_dir, split=split)
    console.print(f"serving {len(catalog)} tasks over OpenEnv on http://{host}:{port} (WebSocket /ws); "
                  "Ctrl-C stops and removes every sandbox", highlight=False)
    serve_openenv(catalog, host=host, port=port, max_sessions=max_sessions)
