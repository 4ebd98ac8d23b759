"""A stand-in for the ``conda`` command, enough for ``snakemake --sdm conda
--conda-create-envs-only``, offline: it answers Snakemake's checks and, for ``conda env create
--file F``, does what conda does with F's pip section (a requirements file written next to F, pip
run from F's folder) but only parses it with pip's own parser, recording the result as JSON in
``$FAKE_CONDA_RECORD`` (one object per created env)."""

import json
import os
import sys
from pathlib import Path

import yaml


def parse_pip_section(env_file):
    """Each pip line of ``env_file`` as pip reads it: requirement, editable, constraint."""
    from pip._internal.network.session import PipSession
    from pip._internal.req.req_file import parse_requirements

    folder = env_file.parent
    spec = yaml.safe_load(env_file.read_text())
    pip_lines = next(d["pip"] for d in spec["dependencies"] if isinstance(d, dict) and "pip" in d)
    requirements = folder / "condaenv.fake.requirements.txt"
    requirements.write_text("\n".join(pip_lines) + "\n")
    os.chdir(folder)
    try:
        parsed = parse_requirements(requirements.name, session=PipSession())
        return [
            {"requirement": r.requirement, "editable": r.is_editable, "constraint": r.constraint}
            for r in parsed
        ]
    finally:
        requirements.unlink()


def main(args):
    if args == ["--version"]:
        print("conda 24.7.1")
    elif args[:2] == ["info", "--json"]:
        prefix = os.environ["FAKE_CONDA_PREFIX"]
        print(json.dumps({"conda_prefix": prefix, "platform": "linux-64", "envs_dirs": [prefix]}))
    elif args[:2] == ["config", "--get"]:
        print(json.dumps({"get": {"channel_priority": "strict"}}))
    elif args[:2] == ["env", "create"]:
        env_file = Path(args[args.index("--file") + 1].strip('"'))
        prefix = Path(args[args.index("--prefix") + 1].strip('"'))
        record = {
            "env_file": str(env_file),
            "source": os.environ.get("OMICSBAYES_SOURCE"),
            "pip": parse_pip_section(env_file),
        }
        with open(os.environ["FAKE_CONDA_RECORD"], "a") as out:
            out.write(json.dumps(record) + "\n")
        (prefix / "bin").mkdir(parents=True)
    elif args[0] == "clean":
        pass
    else:
        print(f"fake conda: unexpected {args}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
