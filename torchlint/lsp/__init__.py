"""The torchlint language server: ``torchlint server`` speaks LSP over stdio.

It needs the optional ``lsp`` extra (pygls); the linter itself does not.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

INSTALL_HINT = (
    "torchlint: error: the language server needs pygls, which is not installed.\n"
    "Install it with: pip install 'torchlint[lsp]'"
)


def main(argv: Sequence[str] = ()) -> int:
    """Run the server until the client disconnects; exit code 2 when pygls is missing."""
    parser = argparse.ArgumentParser(prog="torchlint server", description="Run the torchlint language server.")
    # Editors' LSP clients often pass --stdio; stdio is the only transport.
    parser.add_argument("--stdio", action="store_true", help="talk LSP over stdin/stdout (the default)")
    parser.parse_args(argv)
    try:
        import lsprotocol  # noqa: F401
        import pygls  # noqa: F401
    except ImportError:
        print(INSTALL_HINT, file=sys.stderr)
        return 2
    from torchlint.lsp.server import serve

    serve()
    return 0
