"""Starts moto's server on a free loopback port for the AWS provider's integration tests.

EC2 actions moto lacks and the provider calls (placement groups, capacity reservations) are
added by ``standins.py`` beside this file.

Prints the endpoint (``http://127.0.0.1:<port>``) on its first line of stdout once the server
answers, then serves until its standard input closes (the parent exited or closed the pipe) or it
gets SIGTERM/SIGINT. Fake credentials only: moto never forwards anything to AWS.

Three stand-ins fill what moto 5.2.5 lacks (karpenter-aws's moto tests ``moto::standins`` and
``moto::provider`` check them; the AWS-mode end-to-end suite relies on them):

- SSM: AWS publishes the EKS-optimized AMI ids as public parameters under
  ``/aws/service/eks/`` (what an EC2NodeClass ``alias`` resolves through). moto has none of
  them and refuses PutParameter for any ``/aws/...`` name; here PutParameter may write names
  under ``/aws/service/eks/`` (only those), so a test publishes an AMI id as AWS would and
  changes it as an AMI release does.
- Pricing: moto has no Price List API. ``AWSPriceListService.GetProducts`` is answered from
  ``ON_DEMAND`` and ``BARE_METAL`` below (a few Linux on-demand prices, in AWS's PriceList
  item format) for the region the ``regionCode`` filter names; other filters are not applied.

Usage: python server.py  (with the virtualenv of scripts/moto/install.sh)
"""

import json

import os
import signal
import sys
import threading

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-west-2")

from moto.moto_server.werkzeug_app import DomainDispatcherApplication  # noqa: E402
from moto.server import ThreadedMotoServer  # noqa: E402
from moto.ec2.models.launch_templates import LaunchTemplateVersion  # noqa: E402
from moto.ssm.models import SimpleSystemManagerBackend  # noqa: E402

# --- SSM: AWS's public EKS AMI parameters may be written -----------------------------------
PUBLIC_EKS = "/aws/service/eks/"
_put_parameter = SimpleSystemManagerBackend.put_parameter


def put_parameter(self, name, *args, **kwargs):
    if not name.startswith(PUBLIC_EKS):
        return _put_parameter(self, name, *args, **kwargs)
    # moto's reserved-name check is on the name: store under a private name, then move the
    # versions to the public one.
    private = "/karpenter-rs-public" + name
    if name in self._parameters:
        self._parameters[private] = self._parameters.pop(name)
    try:
        return _put_parameter(self, private, *args, **kwargs)
    finally:
        if private in self._parameters:
            versions = self._parameters.pop(private)
            for v in versions:
                v.name = name
            self._parameters[name] = versions


SimpleSystemManagerBackend.put_parameter = put_parameter

# --- EC2: a fleet instance gets its launch template's network-interface security groups ---
def template_groups(data):
    """The security group ids of a launch template's network interface 0, [] when none."""
    for key in ("NetworkInterfaces", "NetworkInterface"):
        nics = data.get(key)
        if isinstance(nics, dict):
            nics = list(nics.values())
        for nic in nics or []:
            if not isinstance(nic, dict) or str(nic.get("DeviceIndex", "0")) != "0":
                continue
            for gkey in ("Groups", "SecurityGroupIds", "SecurityGroupId"):
                groups = nic.get(gkey)
                if isinstance(groups, dict):
                    groups = list(groups.values())
                if groups:
                    return [g if isinstance(g, str) else g.get("GroupId") for g in groups]
    return []


_template_version_init = LaunchTemplateVersion.__init__


def template_version_init(self, template, number, data, description):
    _template_version_init(self, template, number, data, description)
    # moto's fleets take an instance's groups from the template data's GroupSet.
    if not self.data.get("GroupSet") and not self.data.get("SecurityGroupIds"):
        groups = template_groups(self.data)
        if groups:
            self.data["GroupSet"] = groups


LaunchTemplateVersion.__init__ = template_version_init

# --- Pricing: GetProducts from a small table ------------------------------------------------
# Linux, shared tenancy, on-demand, USD per hour (us-east-1 list prices).
ON_DEMAND = {
    "c5.large": "0.085",
    "c5.xlarge": "0.17",
    "m5.large": "0.096",
    "m5.xlarge": "0.192",
    "r5.large": "0.126",
    "t3.medium": "0.0416",
    "t3.large": "0.0832",
}
# Bare metal (the second query: dedicated tenancy, "Compute Instance (bare metal)").
BARE_METAL = {"c5.metal": "4.08", "m5.metal": "4.608"}


def price_item(region, instance_type, usd, tenancy):
    return json.dumps(
        {
            "product": {
                "productFamily": "Compute Instance"
                + (" (bare metal)" if tenancy == "Dedicated" else ""),
                "attributes": {
                    "instanceType": instance_type,
                    "regionCode": region,
                    "operatingSystem": "Linux",
                    "tenancy": tenancy,
                    "preInstalledSw": "NA",
                    "capacitystatus": "Used",
                },
            },
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    "T.JRTCKXETXF": {
                        "priceDimensions": {
                            "T.JRTCKXETXF.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "pricePerUnit": {"USD": usd},
                            }
                        }
                    }
                }
            },
        }
    )


def get_products(body):
    filters = {f.get("Field"): f.get("Value") for f in body.get("Filters", [])}
    region = filters.get("regionCode", "us-east-1")
    tenancy = filters.get("tenancy", "Shared")
    table = BARE_METAL if tenancy == "Dedicated" else ON_DEMAND
    items = [price_item(region, t, p, tenancy) for t, p in sorted(table.items())]
    return {"FormatVersion": "aws_v1", "PriceList": items}


_dispatch = DomainDispatcherApplication.__call__


def dispatch(self, environ, start_response):
    target = environ.get("HTTP_X_AMZ_TARGET", "")
    if not target.startswith("AWSPriceListService."):
        return _dispatch(self, environ, start_response)
    length = int(environ.get("CONTENT_LENGTH") or 0)
    raw = environ["wsgi.input"].read(length) if length else b"{}"
    if target == "AWSPriceListService.GetProducts":
        status, answer = "200 OK", get_products(json.loads(raw or b"{}"))
    else:
        status = "400 Bad Request"
        answer = {"__type": "InvalidParameterException", "message": f"{target} is not served"}
    data = json.dumps(answer).encode()
    start_response(
        status,
        [("Content-Type", "application/x-amz-json-1.1"), ("Content-Length", str(len(data)))],
    )
    return [data]


DomainDispatcherApplication.__call__ = dispatch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import standins  # noqa: E402

standins.install()

stop = threading.Event()


def on_signal(_signum, _frame):
    stop.set()


def watch_stdin():
    # EOF on stdin: the parent is gone.
    try:
        while sys.stdin.read(4096):
            pass
    except Exception:
        pass
    stop.set()


server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
server.start()
host, port = server.get_host_and_port()
print(f"http://{host}:{port}", flush=True)
signal.signal(signal.SIGTERM, on_signal)
signal.signal(signal.SIGINT, on_signal)
if "--no-stdin" not in sys.argv:
    threading.Thread(target=watch_stdin, daemon=True).start()
stop.wait()
server.stop()
