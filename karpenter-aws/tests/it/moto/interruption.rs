//! The SQS interruption consumer against a moto queue.

use std::collections::BTreeMap;
use std::time::Duration;

use karpenter_aws::sdk::interruption::InterruptionQueue;
use karpenter_core::operator::InterruptionKind;

use super::env::{clients, cluster_name};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs moto (scripts/moto/install.sh): scripts/test runs these with --ignored"]
async fn messages_become_operator_inputs_and_malformed_ones_are_deleted() {
    let clients = clients(None).await;
    let name = cluster_name("queue");
    clients
        .sqs
        .create_queue()
        .queue_name(&name)
        .send()
        .await
        .unwrap();
    let queue = InterruptionQueue::new(&clients, &name).await.unwrap();
    let bodies = [
        r#"{"version":"0","source":"aws.ec2","detail-type":"EC2 Spot Instance Interruption Warning","time":"2026-01-01T00:00:00Z","detail":{"instance-id":"i-0abc","instance-action":"terminate"}}"#,
        r#"{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","time":"2026-01-01T00:00:00Z","detail":{"instance-id":"i-0def","state":"stopping"}}"#,
        r#"{"version":"0","source":"aws.ec2","detail-type":"EC2 Instance State-change Notification","time":"2026-01-01T00:00:00Z","detail":{"instance-id":"i-0unknown","state":"stopping"}}"#,
        r#"not json"#,
        r#"{"version":"0","source":"aws.s3","detail-type":"Object Created","time":"2026-01-01T00:00:00Z","detail":{}}"#,
    ];
    for b in bodies {
        clients
            .sqs
            .send_message()
            .queue_url(queue.url())
            .message_body(b)
            .send()
            .await
            .unwrap();
    }
    let known: BTreeMap<&str, &str> = [
        ("i-0abc", "aws:///us-east-1a/i-0abc"),
        ("i-0def", "aws:///us-east-1b/i-0def"),
    ]
    .into();
    let mut events = Vec::new();
    let mut malformed = Vec::new();
    let mut received = 0;
    for _ in 0..5 {
        let stats = queue
            .poll(
                Duration::from_secs(1),
                |id| known.get(id).map(|p| p.to_string()),
                |e| events.push(e),
            )
            .await
            .unwrap();
        received += stats.received;
        assert_eq!(stats.deleted, stats.received);
        malformed.extend(stats.malformed);
        if received == bodies.len() {
            break;
        }
    }
    assert_eq!(received, bodies.len());
    events.sort_by(|a, b| a.provider_id.cmp(&b.provider_id));
    assert_eq!(events.len(), 2);
    assert_eq!(events[0].kind, InterruptionKind::SpotInterrupted);
    assert_eq!(events[0].provider_id, "aws:///us-east-1a/i-0abc");
    assert_eq!(events[1].kind, InterruptionKind::InstanceStopped);
    malformed.sort();
    assert_eq!(malformed, ["invalid_json", "unrecognized"]);
    // Everything was deleted: the queue is empty.
    let left = queue
        .poll(Duration::from_secs(1), |_| None, |_| {})
        .await
        .unwrap();
    assert_eq!(left.received, 0);
}
