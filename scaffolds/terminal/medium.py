"""Medium terminal tasks: one command line, which the model has to work out from the goal."""

from __future__ import annotations

from agentrl.scaffolds.terminal.spec import TerminalTask

_LOGS = {
    "logs/app.log": "start\n",
    "logs/web/access.log": "GET /\n",
    "logs/web/error.log": "oops\n",
    "logs/db/slow.log": "SELECT 1\n",
    "logs/db/notes.txt": "not a log\n",
    "logs/old.log.gz": "binary-ish\n",
}
_SERVER_LOG = "".join(
    f"2024-05-0{d} {level} request {i}\n"
    for i, (d, level) in enumerate(
        [(1, "INFO"), (1, "ERROR"), (2, "WARN"), (2, "ERROR"), (3, "INFO"), (3, "INFO"), (4, "ERROR"), (5, "DEBUG")]
        + [(6, "ERROR"), (7, "INFO"), (8, "WARN"), (9, "ERROR"), (9, "INFO")]
    )
)
_NAMES = "mia\nleo\nava\nleo\nzoe\nmia\nben\nava\nleo\n"
_SALES = "product,amount\napple,12\npear,30\nplum,7\nfig,45\nkiwi,19\n"
_CONFIG = "[db]\nhost=localhost\nport=5432\n\n[cache]\nhost=localhost\nurl=redis://localhost:6379\n"
_CONFIG_FIXED = _CONFIG.replace("localhost", "db.internal")

TASKS = [
    TerminalTask(
        "find-logs",
        "medium",
        "List every file under logs/ whose name ends in .log, as paths like logs/web/access.log, one per line and "
        "sorted, in loglist.txt.",
        files=_LOGS,
        check="expect(lines('loglist.txt') == ['logs/app.log', 'logs/db/slow.log', 'logs/web/access.log', "
        "'logs/web/error.log'], 'loglist.txt does not list exactly the .log files, sorted')",
        expert=("find logs -name '*.log' | sort > loglist.txt",),
        outputs=("loglist.txt",),
    ),
    TerminalTask(
        "count-errors",
        "medium",
        "How many lines of server.log contain ERROR? Write just the number to errors.txt.",
        files={"server.log": _SERVER_LOG},
        check="expect(text('errors.txt').strip() == '5', 'errors.txt does not hold the number of ERROR lines')",
        expert=("grep -c ERROR server.log > errors.txt",),
        outputs=("errors.txt",),
    ),
    TerminalTask(
        "unique-names",
        "medium",
        "Write the distinct names in names.txt to unique.txt, sorted alphabetically, one per line.",
        files={"names.txt": _NAMES},
        check="expect(lines('unique.txt') == ['ava', 'ben', 'leo', 'mia', 'zoe'], 'unique.txt is not the sorted "
        "distinct names')",
        expert=("sort -u names.txt > unique.txt",),
        outputs=("unique.txt",),
        split="test",
    ),
    TerminalTask(
        "csv-total",
        "medium",
        "sales.csv has a header line and an amount column. Write the sum of the amounts to total.txt.",
        files={"sales.csv": _SALES},
        check="expect(text('total.txt').strip() in ('113', '113.0'), 'total.txt does not hold the sum 113')",
        expert=("awk -F, 'NR > 1 { s += $2 } END { print s }' sales.csv > total.txt",),
        outputs=("total.txt",),
    ),
    TerminalTask(
        "replace-host",
        "medium",
        "In config.ini, replace every occurrence of localhost with db.internal and change nothing else.",
        files={"config.ini": _CONFIG},
        check=f"expect(text('config.ini') == {_CONFIG_FIXED!r}, 'config.ini is not exactly the edited file')",
        expert=("sed -i 's/localhost/db.internal/g' config.ini",),
        outputs=("config.ini",),
    ),
    TerminalTask(
        "permissions",
        "medium",
        "Make every .sh file in scripts/ executable (and nothing else there), and make secrets.txt readable and "
        "writable by its owner only (mode 600).",
        files={
            "scripts/a.sh": "echo a\n",
            "scripts/b.sh": "echo b\n",
            "scripts/c.py": "print(1)\n",
            "secrets.txt": "k\n",
        },
        setup="chmod 644 scripts/* secrets.txt",
        check="import stat\n"
        "mode = lambda p: stat.S_IMODE(os.stat(p).st_mode) if os.path.isfile(p) else fail(f'{p} is missing')\n"
        "expect(all(mode(f'scripts/{n}.sh') & 0o100 for n in 'ab'), 'a .sh file is not executable')\n"
        "expect(not mode('scripts/c.py') & 0o111, 'scripts/c.py became executable')\n"
        "expect(mode('secrets.txt') == 0o600, 'secrets.txt is not mode 600')\n"
        "expect(text('secrets.txt') == 'k\\n', 'secrets.txt was changed')",
        expert=("chmod +x scripts/*.sh && chmod 600 secrets.txt",),
        outputs=("secrets.txt", "scripts/a.sh"),
    ),
    TerminalTask(
        "largest-file",
        "medium",
        "Which file in data/ is the largest? Write just its file name (without the directory) to largest.txt.",
        files={},
        setup="mkdir data && head -c 300 /dev/zero > data/small.bin && head -c 9000 /dev/zero > data/big.bin "
        "&& head -c 4000 /dev/zero > data/medium.bin && head -c 10 /dev/zero > data/tiny.bin",
        check="expect(text('largest.txt').strip() == 'big.bin', 'largest.txt does not name the largest file')",
        expert=("ls -S data | head -n 1 > largest.txt",),
        outputs=("largest.txt",),
    ),
    TerminalTask(
        "greet-script",
        "medium",
        "Write an executable script greet.sh that prints Hello, NAME! where NAME is the value of the environment "
        "variable NAME.",
        check="for name in ('Ada', 'Grace Hopper'):\n"
        "    expect(os.access('greet.sh', os.X_OK), 'greet.sh is not executable')\n"
        "    got = run(['./greet.sh'], env={'NAME': name})\n"
        "    expect(got.strip() == f'Hello, {name}!', f'NAME={name} ./greet.sh printed {got!r}')",
        expert=("printf '#!/bin/bash\\necho \"Hello, $NAME!\"\\n' > greet.sh && chmod +x greet.sh",),
        outputs=("greet.sh",),
        split="test",
    ),
]
