"""`gpugov guide TENANT [REPO]`: the markdown guide a tenant's users read to submit work."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from pathlib import Path

from gpugov import i18n
from gpugov.app.exit import ExitCode
from gpugov.cli.common import CommandFailed, fail


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "guide",
        help="print a tenant's guide: its queues, priority classes, pools, labels and a sample Job per pool",
        description="Print, as markdown, what a tenant's users need to submit work: its queues and the priority "
        "classes each admits, the pools it holds accelerators in and their quota, the exact labels a Job needs, "
        "one sample Job per pool, how to see the queue (gpugov queue, gpugov why) and whom to ask. Generated "
        "from the declarations (they must validate). Exit codes: 0 printed, 1 the declarations have errors, "
        "2 no such tenant or bad usage.",
    )
    p.add_argument("tenant", metavar="TENANT", help="the tenant's name")
    p.add_argument("repo", nargs="?", default=".", help="repository root (default: .)")
    p.add_argument("--out", metavar="FILE", help="write the guide to FILE instead of printing it")
    p.set_defaults(func=cmd_guide)


def language(environ: Mapping[str, str], chosen: str | None = None) -> str:
    """The guide's language (en or zh): `--lang` (gpugov's, before or after the command), else the
    locale variables in POSIX order of precedence, as every other message."""
    return "zh" if (chosen or i18n.from_environment(environ)) == "zh_CN" else "en"


def cmd_guide(args: argparse.Namespace) -> ExitCode:
    from gpugov.app.pipeline import InputError
    from gpugov.app.revision import InvalidDeclarations
    from gpugov.findings.report import REPORTERS
    from gpugov.guide import GuideError, tenant_guide

    try:
        text = tenant_guide(Path(args.repo), args.tenant, language(os.environ, getattr(args, "ui_language", None)))
    except InputError as exc:
        return fail(f"guide: {exc}")
    except GuideError as exc:
        return fail(f"guide: {exc}")
    except InvalidDeclarations as exc:
        sys.stderr.write(REPORTERS["text"](exc.findings, len(exc.validation.files)))
        raise CommandFailed(i18n.Text("refusing to continue: the declarations have errors"), exc.exit_code) from None
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)
    return ExitCode.OK
