import shutil, sys, tempfile, time, signal
from pathlib import Path
sys.path.insert(0, '/work/wt/scale')
from cronbox.migrate import migrate
from cronbox.pgcluster import Cluster
from bench.database import DURABLE_SETTINGS
folder = Path(tempfile.mkdtemp(prefix='scale9-'))
c = Cluster(folder / 'pg', settings=DURABLE_SETTINGS); c.init(); dsn = c.start()
migrate(dsn)
Path('/tmp/scale9/dsn').write_text(dsn)
print(dsn, flush=True)
stop = False
def h(*a):
    global stop; stop = True
signal.signal(signal.SIGTERM, h)
while not stop: time.sleep(1)
c.stop(); shutil.rmtree(folder, ignore_errors=True)
