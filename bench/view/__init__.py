"""`tbx view`: a static, offline HTML site of a run's tasks and attempts.

load.py    reads run directories (results, attempt records, trajectories, states) and the dataset
diff.py    the effects diff against golden, grouped by table and primary key
pages.py   renders the tasks, task and attempt pages (plain HTML; the tasks page filters with JS)
assets.py  the site's CSS and JavaScript (written as local files: nothing from the network)
site.py    writes the site, one attempt at a time, next to report.html
serve.py   serves a written site on 127.0.0.1
compare_links.py  tbx compare's links from flipped tasks to the task pages of these sites
"""
