from migrator.cli import run

run()
