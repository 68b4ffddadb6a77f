"""`agentrl view RUN_DIR`: a run directory in the browser, read-only and live while the run writes it.

The run directory's reader (`run_reader.py`, over byte-offset indexes of the trajectory files in
`trajectory_file.py`), what a trajectory shows (`trajectory_page.py`, with the run's tokenizer in
`token_decoder.py`), the branch tree of a group (`branch_tree.py`), the app (`app.py`: FastAPI, served by uvicorn)
and the page itself (`static/`: plain HTML, JavaScript and CSS, no build step).
"""
