"""Peering: operators that serve the same resources find each other and take turns.

Each operator writes itself (its id, priority and last-seen time) into a peering object; one
that sees a peer of higher priority pauses until that peer is gone. Here a startup handler
picks the peering and this operator's priority, as the command line (`--peering`,
`--priority`) would; the handlers themselves know nothing of it."""

import bosun as kopf


@kopf.on.startup()
def join_the_peering(settings, logger, **_):
    settings.peering.name = "default"  # the ClusterBosunPeering of deploy/peering.yaml
    settings.peering.priority = 50  # a peer with a higher one makes this operator pause
    settings.peering.mandatory = False  # without the peering object, run alone
    logger.info("Asking for priority 50 in the peering 'default'.")


@kopf.on.create("kopfexamples")
def take_turn(name, logger, **_):
    logger.info(f"{name} is served by the operator whose turn it is.")
