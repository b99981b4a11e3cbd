"""adopt: `gpugov import`, a declarations repository from a cluster that already runs Kueue or Volcano.

inventory sorts the objects read (sources: a live cluster or a folder of YAML), convert (Kueue)
or volcano (Volcano) maps them to declaration documents and lists in the report what they cannot express, write puts
the files in place atomically, and run proves the result by compiling it back and comparing
the scheduler objects (canonical) with the input.
"""

from gpugov.adopt.inventory import Inventory, inventory
from gpugov.adopt.report import Gap, ImportReport
from gpugov.adopt.run import InvalidImport, import_inventory

__all__ = ["Gap", "ImportReport", "InvalidImport", "Inventory", "import_inventory", "inventory"]
