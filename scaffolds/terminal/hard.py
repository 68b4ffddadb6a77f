"""Hard terminal tasks: several steps (look, act, verify), repairs of broken scripts, multi-stage pipelines."""

from __future__ import annotations

import json

from agentrl.scaffolds.terminal.spec import TerminalTask

_STATS_PY = """import sys


def mean(values):
    return sum(values) / len(values) + 1


with open(sys.argv[1]) as f:
    numbers = [int(line) for line in f]
print(mean(numbers)
"""
_STATS_CHECK = """import tempfile
folder = tempfile.mkdtemp()
for numbers, want in (("10\\n20\\n45\\n", 25.0), ("1.5\\n2.5\\n\\n", 2.0), ("-4\\n", -4.0)):
    path = os.path.join(folder, "nums.txt")
    with open(path, "w") as f:
        f.write(numbers)
    got = run(["python3", "stats.py", path]).strip()
    try:
        ok = abs(float(got) - want) < 1e-9
    except ValueError:
        ok = False
    expect(ok, f"stats.py printed {got!r} for {numbers!r}, expected {want}")
"""
_STATS_FIX = (
    "sed -i 's/ + 1$//; s/int(line) for line in f]/float(line) for line in f if line.strip()]/; "
    "s/^print(mean(numbers)$/print(mean(numbers))/' stats.py"
)

_IPS = ["10.0.0.5"] * 7 + ["10.0.0.2"] * 5 + ["192.168.1.9"] * 4 + ["10.0.0.7"] * 2 + ["172.16.0.1"]
_PATHS = ["/", "/login", "/api/items", "/static/app.js", "/about"]
_SHUFFLED_IPS = [_IPS[k * 7 % len(_IPS)] for k in range(len(_IPS))]  # a fixed permutation: 7 and 19 are coprime
_ACCESS_LOG = "".join(
    f'{ip} - - [12/Mar/2024:10:{k:02d}:00] "GET {_PATHS[k % 5]} HTTP/1.1" {200 if k % 4 else 404}\n'
    for k, ip in enumerate(_SHUFFLED_IPS)
)

_INBOX = {"inbox/a.jpg": "jpeg a\n", "inbox/b.png": "png b\n", "inbox/c.txt": "text c\n", "inbox/d.jpg": "jpeg d\n"}
_INBOX |= {"inbox/notes.md": "# notes\n"}

_PROJECT = {
    "project/main.py": "from util.helpers import greet\n\nprint(greet('world'))\n",
    "project/util/helpers.py": "def greet(name):\n    return f'hello {name}'\n",
    "project/tests/test_helpers.py": "from util.helpers import greet\n\n\ndef test_greet():\n    assert greet('x')\n",
    "project/README.md": "# project\n",
    "project/data/rows.csv": "a,b\n1,2\n",
}
_PY_FILES = {p: t for p, t in _PROJECT.items() if p.endswith(".py")}
_ARCHIVE_CHECK = f"""import tarfile
expected = {_PY_FILES!r}
try:
    with tarfile.open("src.tar.gz", "r:gz") as tar:
        members = [m for m in tar.getmembers() if m.isfile()]
        files = {{m.name.removeprefix("./"): tar.extractfile(m).read().decode() for m in members}}
except (OSError, tarfile.TarError, EOFError) as e:
    fail(f"src.tar.gz is not a readable gzip-compressed tar archive: {{e}}")
expect(files == expected, f"src.tar.gz holds {{sorted(files)}}, expected exactly {{sorted(expected)}}")
"""

_USERS = [
    {"name": "Olga", "age": 41, "active": True},
    {"name": "Ben", "age": 29, "active": True},
    {"name": "Chen", "age": 35, "active": False},
    {"name": "Amara", "age": 52, "active": True},
    {"name": "Dev", "age": 31, "active": True},
    {"name": "Eli", "age": 30, "active": True},
]
_ACTIVE_PY = (
    "python3 -c \"import json; users = json.load(open('users.json')); "
    "print('\\n'.join(sorted(u['name'] for u in users if u['active'] and u['age'] > 30)))\" > report.txt"
)

_LIST_A = "pear\napple\nfig\nplum\nkiwi\napple\n"
_LIST_B = "kiwi\nlime\napple\nmango\nplum\n"

_WORDCOUNT = "#!/bin/bash\n# Print the number of words in the file given as the first argument.\nfile=$2\nwc -w $file\n"
_WORDCOUNT_CHECK = """import tempfile
folder = tempfile.mkdtemp()
for name, words in (("a.txt", "one two three\\nfour\\n"), ("with space.txt", "x  y\\n\\nz w v u\\n")):
    path = os.path.join(folder, name)
    with open(path, "w") as f:
        f.write(words)
    expect(os.access("wordcount.sh", os.X_OK), "wordcount.sh is not executable")
    got = run(["./wordcount.sh", path]).strip()
    expect(got == str(len(words.split())), f"wordcount.sh printed {got!r} for a file of {len(words.split())} words")
"""

_DOCS = {
    "docs/index.md": "# Handbook\nSee team/ for plans.\n",
    "docs/team/q2.md": "# Q2\nShipped search.\nNo dead links left.\n",
    "docs/team/q3.md": "# Q3\nGoals: faster builds.\nOwner: Rui.\nThe hard deadline is 2024-09-30.\nStretch: docs.\n",
    "docs/ops/oncall.txt": "rotation weekly\nescalate after 30 min\n",
}

_CSVS = {
    "data/alpha.csv": "id,v\n1,a\n2,b\n3,c\n",
    "data/beta.csv": "id,v\n",
    "data/gamma.csv": "id,v\n" + "".join(f"{i},x\n" for i in range(12)),
    "data/readme.txt": "not a csv\nat all\n",
}


def _normalised_lines(path: str) -> str:
    return f"[' '.join(line.split()) for line in lines({path!r})]"


TASKS = [
    TerminalTask(
        "fix-stats",
        "hard",
        "stats.py should print the mean of the numbers (one per line) in the file named by its first argument: "
        "python3 stats.py nums.txt. It is broken. Fix it.",
        files={"stats.py": _STATS_PY, "nums.txt": "1\n2\n3\n4\n"},
        check=_STATS_CHECK,
        expert=("python3 stats.py nums.txt", _STATS_FIX, "python3 stats.py nums.txt"),
        outputs=("stats.py",),
    ),
    TerminalTask(
        "top-ips",
        "hard",
        "Find the 3 IP addresses (the first field of access.log) with the most requests, and write them to "
        "top_ips.txt as lines COUNT IP, most requests first.",
        files={"access.log": _ACCESS_LOG},
        check=f"expect({_normalised_lines('top_ips.txt')} == ['7 10.0.0.5', '5 10.0.0.2', '4 192.168.1.9'], "
        "'top_ips.txt does not hold the top 3 as COUNT IP lines')",
        expert=(
            "cut -d' ' -f1 access.log | sort | uniq -c | sort -rn | head -n 3",
            "cut -d' ' -f1 access.log | sort | uniq -c | sort -rn | head -n 3 | awk '{print $1, $2}' > top_ips.txt",
        ),
        outputs=("top_ips.txt",),
    ),
    TerminalTask(
        "sort-by-extension",
        "hard",
        "Move each file in inbox/ into sorted/EXT/, where EXT is its extension (inbox/a.jpg goes to "
        "sorted/jpg/a.jpg). Leave inbox/ empty.",
        files=_INBOX,
        check=f"for path, content in {_INBOX!r}.items():\n"
        "    name = path.split('/')[1]\n"
        "    expect(text(f\"sorted/{name.rsplit('.', 1)[1]}/{name}\") == content, f'{name} is not in its folder')\n"
        "expect(not os.path.exists('inbox') or not os.listdir('inbox'), 'inbox/ is not empty')",
        expert=(
            "ls inbox",
            'cd inbox && for f in *; do mkdir -p "../sorted/${f##*.}" && mv "$f" "../sorted/${f##*.}/"; done',
            "cd /workspace && find sorted -type f | sort",
        ),
        outputs=("sorted/jpg/a.jpg", "sorted/md/notes.md"),
    ),
    TerminalTask(
        "archive-sources",
        "hard",
        "Create a gzip-compressed tar archive src.tar.gz holding only the .py files of project/, with their paths "
        "(project/main.py, ...).",
        files=_PROJECT,
        setup="mkdir -p project/util/__pycache__ && echo cached > project/util/__pycache__/helpers.cpython-311.pyc",
        check=_ARCHIVE_CHECK,
        expert=(
            "find project -name '*.py' | sort",
            "find project -name '*.py' | tar -czf src.tar.gz -T -",
            "tar -tzf src.tar.gz",
        ),
        outputs=("src.tar.gz",),
        split="test",
    ),
    TerminalTask(
        "active-users",
        "hard",
        "users.json lists users with name, age and active. Write the names of the active users older than 30 to "
        "report.txt, sorted alphabetically, one per line.",
        files={"users.json": json.dumps(_USERS, indent=1) + "\n"},
        check="expect(lines('report.txt') == ['Amara', 'Dev', 'Olga'], 'report.txt does not list the right users')",
        expert=("head -c 200 users.json", _ACTIVE_PY, "cat report.txt"),
        outputs=("report.txt",),
    ),
    TerminalTask(
        "compare-lists",
        "hard",
        "Write the lines that appear in both list_a.txt and list_b.txt to common.txt, and the lines that appear "
        "only in list_a.txt to only_a.txt; each sorted, without duplicates, one per line.",
        files={"list_a.txt": _LIST_A, "list_b.txt": _LIST_B},
        check="expect(lines('common.txt') == ['apple', 'kiwi', 'plum'], 'common.txt is wrong')\n"
        "expect(lines('only_a.txt') == ['fig', 'pear'], 'only_a.txt is wrong')",
        expert=(
            "sort -u list_a.txt > /tmp/a && sort -u list_b.txt > /tmp/b",
            "comm -12 /tmp/a /tmp/b > common.txt && comm -23 /tmp/a /tmp/b > only_a.txt",
        ),
        outputs=("common.txt", "only_a.txt"),
        split="test",
    ),
    TerminalTask(
        "fix-wordcount",
        "hard",
        "./wordcount.sh FILE should print only the number of words in FILE, but it does not work. Fix it; it must "
        "stay an executable script.",
        files={"wordcount.sh": _WORDCOUNT},
        check=_WORDCOUNT_CHECK,
        expert=(
            "cat wordcount.sh",
            "printf '#!/bin/bash\\nwc -w < \"$1\"\\n' > wordcount.sh && chmod +x wordcount.sh",
            "./wordcount.sh wordcount.sh",
        ),
        outputs=("wordcount.sh",),
    ),
    TerminalTask(
        "find-deadline",
        "hard",
        "One line of the files under docs/ states a deadline. Write where it is, as FILE:LINE (for example "
        "docs/index.md:2), to found.txt, and the date it gives, as YYYY-MM-DD, to date.txt.",
        files=_DOCS,
        check="expect(text('found.txt').strip() == 'docs/team/q3.md:4', 'found.txt does not point at the line')\n"
        "expect(text('date.txt').strip() == '2024-09-30', 'date.txt does not hold the date')",
        expert=("grep -rn deadline docs", "echo docs/team/q3.md:4 > found.txt && echo 2024-09-30 > date.txt"),
        outputs=("found.txt", "date.txt"),
    ),
    TerminalTask(
        "csv-summary",
        "hard",
        "For each .csv file in data/, write a line NAME ROWS (its file name and its number of rows, not counting "
        "the header) to summary.txt, sorted by name.",
        files=_CSVS,
        check=f"expect({_normalised_lines('summary.txt')} == ['alpha.csv 3', 'beta.csv 0', 'gamma.csv 12'], "
        "'summary.txt is not NAME ROWS per csv file')",
        expert=(
            "ls data && head -n 2 data/*.csv",
            'for f in data/*.csv; do echo "$(basename "$f") $(($(wc -l < "$f") - 1))"; done | sort > summary.txt',
            "cat summary.txt",
        ),
        outputs=("summary.txt",),
    ),
]
