"""``dgtraces cite``: BibTeX for the package, the dataset release (manifest digest) and the
paper."""

from __future__ import annotations

import click

from dgtraces.cli.options import release_option


@click.command()
@release_option("Dataset release to cite ('latest': the newest).")
def cite(release) -> None:
    """Print BibTeX for the package, the dataset release (with its manifest digest) and the
    DAG-model paper. Cite the release you read: pin it with --release."""
    from dgtraces.publish.citation import cite as citation

    c = citation(release)
    click.echo(f"% dgtraces {c.package_version}, dataset release {c.release}, "
               f"manifest digest {c.digest}")
    click.echo(c.bibtex)
