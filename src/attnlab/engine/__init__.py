"""The engine behind every grid: cells, ids, buckets and chunks (:mod:`~attnlab.engine.grid`), results
on disk (:mod:`~attnlab.engine.store`), and the executors that train chunks, locally or on Ray
(:mod:`~attnlab.engine.executors`). It knows no experiment."""
