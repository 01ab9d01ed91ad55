// ShareTool is the tests' Kafka client: Kafka's own Admin, KafkaProducer and KafkaShareConsumer,
// compiled by the tests with javac against kafka-clients. It prints one line per fact the tests check,
// on stdout; everything else (Kafka's logs) goes to stderr.
//
//   setup    BOOTSTRAP TOPIC PARTITIONS REPLICAS GROUP   create the topic, set the group's
//                                                         share.auto.offset.reset=earliest; prints TOPIC_ID id
//   produce  BOOTSTRAP TOPIC COUNT                        COUNT records, acks=all, spread over the
//                                                         partitions in turn; prints PRODUCED count
//   produce-loop BOOTSTRAP TOPIC SECONDS PER_SECOND       sends PER_SECOND records a second for SECONDS,
//                                                         acks=all, over the partitions in turn; prints
//                                                         "ACKED partition offset" for each acknowledged
//                                                         send, "FAILED ..." with its times for each failed
//                                                         one, and at the end "SENT n ACKED a FAILED m
//                                                         LONGEST_FAILURE_MS x MAX_ACK_MS y"
//   leaders  BOOTSTRAP TOPIC                              prints "LEADER partition nodeId ISR size" for each
//                                                         partition
//   delete-topic BOOTSTRAP TOPIC                          deletes the topic with Admin.deleteTopics and waits
//                                                         until the controller has; prints DELETED topic
//   consume  BOOTSTRAP TOPIC GROUP RELEASE_EVERY IDLE_MS [ACK_DELAY_MS [COMMIT_TIMEOUT_MS]]
//                                                         a share consumer with explicit acknowledgement:
//                                                         RELEASEs a first delivery whose offset is a
//                                                         multiple of RELEASE_EVERY (0: never), ACCEPTs the
//                                                         rest; prints "ACCEPTED|RELEASED partition offset
//                                                         deliveryCount" once its commit succeeded; exits
//                                                         after IDLE_MS without records, or on SIGTERM;
//                                                         waits ACK_DELAY_MS before acknowledging what a
//                                                         poll gave, and each commit at most
//                                                         COMMIT_TIMEOUT_MS (default 30 s)
//   timed-consume BOOTSTRAP TOPIC GROUP                   a share consumer with implicit acknowledgement;
//                                                         prints "millis partition offset deliveryCount"
//                                                         for each record as a poll returns it (millis:
//                                                         the wall clock), until SIGTERM
//   jmx      OBJECT_NAMES ATTRIBUTES PID...               attaches to each JVM, reads the comma-separated
//                                                         ATTRIBUTES of each MBean of the ;-separated
//                                                         OBJECT_NAMES; prints "pid objectName attribute
//                                                         value" (value -1 where the MBean is absent)
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicIdPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.WakeupException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

public final class ShareTool {
    public static void main(String[] args) throws Exception {
        switch (args.length > 0 ? args[0] : "") {
            case "setup" -> setup(args[1], args[2], Integer.parseInt(args[3]), Short.parseShort(args[4]), args[5]);
            case "produce" -> produce(args[1], args[2], Integer.parseInt(args[3]));
            case "produce-loop" -> produceLoop(args[1], args[2], Long.parseLong(args[3]), Integer.parseInt(args[4]));
            case "leaders" -> leaders(args[1], args[2]);
            case "delete-topic" -> deleteTopic(args[1], args[2]);
            case "consume" -> consume(args[1], args[2], args[3], Long.parseLong(args[4]), Long.parseLong(args[5]),
                args.length > 6 ? Long.parseLong(args[6]) : 0, args.length > 7 ? Long.parseLong(args[7]) : 30_000);
            case "timed-consume" -> timedConsume(args[1], args[2], args[3]);
            case "jmx" -> jmx(args[1].split(";"), args[2].split(","), java.util.Arrays.copyOfRange(args, 3, args.length));
            default -> {
                System.err.println("usage: ShareTool setup|produce|consume ...");
                System.exit(2);
            }
        }
    }

    static void setup(String bootstrap, String topic, int partitions, short replicas, String group) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            admin.createTopics(List.of(new NewTopic(topic, partitions, replicas))).all().get();
            ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
            AlterConfigOp earliest = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
            admin.incrementalAlterConfigs(Map.of(res, List.of(earliest))).all().get();
            String id = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).topicId().toString();
            System.out.println("TOPIC_ID " + id);
        }
    }

    static void deleteTopic(String bootstrap, String topic) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            admin.deleteTopics(List.of(topic)).all().get();
            System.out.println("DELETED " + topic);
        }
    }

    static void leaders(String bootstrap, String topic) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (Admin admin = Admin.create(p)) {
            var description = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            for (var partition : description.partitions()) {
                int leader = partition.leader() == null ? -1 : partition.leader().id();
                System.out.println("LEADER " + partition.partition() + " " + leader + " ISR " + partition.isr().size());
            }
        }
    }

    static void produce(String bootstrap, String topic, int count) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("linger.ms", "5");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            int partitions = producer.partitionsFor(topic).size();
            for (int i = 0; i < count; i++) {
                producer.send(new ProducerRecord<>(topic, i % partitions, null, "r-" + i));
            }
            producer.flush();
        }
        System.out.println("PRODUCED " + count);
    }

    // shareConsumer is a KafkaShareConsumer of group, with explicit or implicit acknowledgement.
    static KafkaShareConsumer<String, String> shareConsumer(String bootstrap, String group, boolean explicit) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        if (explicit) {
            p.put("share.acknowledgement.mode", "explicit");
        }
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        return new KafkaShareConsumer<>(p);
    }

    // stopOnSigterm wakes the consumer on SIGTERM and gives the main thread 10 s to close it; the flag
    // it returns says the loop must end.
    static AtomicBoolean stopOnSigterm(KafkaShareConsumer<String, String> consumer) {
        AtomicBoolean stopping = new AtomicBoolean();
        Thread main = Thread.currentThread();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            stopping.set(true);
            consumer.wakeup();
            try {
                main.join(10_000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }));
        return stopping;
    }

    static void consume(String bootstrap, String topic, String group, long releaseEvery, long idleMs,
                        long ackDelayMs, long commitTimeoutMs) {
        KafkaShareConsumer<String, String> consumer = shareConsumer(bootstrap, group, true);
        AtomicBoolean stopping = stopOnSigterm(consumer);
        consumer.subscribe(Set.of(topic));
        long lastRecord = System.currentTimeMillis();
        try {
            while (!stopping.get() && System.currentTimeMillis() - lastRecord < idleMs) {
                ConsumerRecords<String, String> records;
                try {
                    records = consumer.poll(Duration.ofMillis(500));
                } catch (WakeupException e) {
                    break;
                } catch (KafkaException e) {
                    System.out.println("ERROR poll " + e);
                    continue;
                }
                if (records.isEmpty()) {
                    continue;
                }
                lastRecord = System.currentTimeMillis();
                if (ackDelayMs > 0) {
                    try {
                        Thread.sleep(ackDelayMs); // holds the records acquired: in flight at their leader
                    } catch (InterruptedException e) {
                        break;
                    }
                }
                List<String> lines = new ArrayList<>();
                for (ConsumerRecord<String, String> r : records) {
                    int count = r.deliveryCount().orElse((short) -1);
                    boolean release = releaseEvery > 0 && count == 1 && r.offset() % releaseEvery == 0;
                    consumer.acknowledge(r, release ? AcknowledgeType.RELEASE : AcknowledgeType.ACCEPT);
                    lines.add((release ? "RELEASED " : "ACCEPTED ") + r.partition() + " " + r.offset() + " " + count);
                }
                Map<TopicIdPartition, Optional<KafkaException>> results;
                try {
                    results = consumer.commitSync(Duration.ofMillis(commitTimeoutMs));
                } catch (WakeupException e) {
                    break;
                } catch (KafkaException e) {
                    // The commit's outcome is unknown: every acknowledgement of the poll is a failed one.
                    System.out.println("ERROR commit " + e);
                    for (String line : lines) {
                        System.out.println("FAILED " + line + " " + e);
                    }
                    System.out.flush();
                    continue;
                }
                for (String line : lines) {
                    int partition = Integer.parseInt(line.split(" ")[1]);
                    // A partition missing from the results has no known outcome: not a success.
                    Optional<KafkaException> failure = results.entrySet().stream()
                        .filter(e -> e.getKey().partition() == partition)
                        .map(Map.Entry::getValue).findFirst()
                        .orElse(Optional.of(new KafkaException("commitSync returned no result for the partition")));
                    System.out.println(failure.isPresent() ? "FAILED " + line + " " + failure.get() : line);
                }
                System.out.flush();
            }
        } finally {
            consumer.close(Duration.ofSeconds(10));
            System.out.println("CLOSED");
        }
    }

    /**
     * produceLoop sends perSecond records a second for the given seconds, each to the next partition,
     * and reports every outcome. A stretch of failures runs from the completion of its first failed
     * send to the completion of the next acknowledged one (or the end): how long the producer could
     * get nothing through. MAX_ACK_MS is the longest a send waited for its acknowledgement.
     */
    static void produceLoop(String bootstrap, String topic, long seconds, int perSecond) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("linger.ms", "5");
        // A send that cannot be acknowledged fails within a minute (Kafka's default is two).
        p.put("delivery.timeout.ms", "60000");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        Object lock = new Object();
        long[] counts = new long[2]; // acknowledged, failed
        long[] failingSince = {-1};
        long[] longestFailure = {0};
        long[] maxAck = {0};
        long sent = 0;
        long end = System.currentTimeMillis() + seconds * 1000;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            int partitions = producer.partitionsFor(topic).size();
            long interval = 1_000_000_000L / perSecond;
            long next = System.nanoTime();
            long lastFlush = System.currentTimeMillis();
            while (System.currentTimeMillis() < end) {
                long index = sent++;
                long sentAt = System.currentTimeMillis();
                org.apache.kafka.clients.producer.Callback done = (metadata, e) -> {
                    long now = System.currentTimeMillis();
                    synchronized (lock) {
                        if (e == null) {
                            counts[0]++;
                            if (failingSince[0] >= 0) {
                                longestFailure[0] = Math.max(longestFailure[0], now - failingSince[0]);
                                failingSince[0] = -1;
                            }
                            maxAck[0] = Math.max(maxAck[0], now - sentAt);
                            System.out.println("ACKED " + metadata.partition() + " " + metadata.offset());
                        } else {
                            counts[1]++;
                            if (failingSince[0] < 0) {
                                failingSince[0] = now;
                            }
                            System.out.println("FAILED at " + now + " record " + index + " sent at " + sentAt + ": " + e);
                        }
                    }
                };
                try {
                    producer.send(new ProducerRecord<>(topic, (int) (index % partitions), null, "r-" + index), done);
                } catch (KafkaException e) {
                    done.onCompletion(null, e);
                }
                if (System.currentTimeMillis() - lastFlush > 200) {
                    System.out.flush();
                    lastFlush = System.currentTimeMillis();
                }
                next += interval;
                long wait = next - System.nanoTime();
                if (wait > 0) {
                    Thread.sleep(wait / 1_000_000, (int) (wait % 1_000_000));
                }
            }
            producer.flush();
        }
        synchronized (lock) {
            if (failingSince[0] >= 0) {
                longestFailure[0] = Math.max(longestFailure[0], System.currentTimeMillis() - failingSince[0]);
            }
            System.out.println("SENT " + sent + " ACKED " + counts[0] + " FAILED " + counts[1]
                + " LONGEST_FAILURE_MS " + longestFailure[0] + " MAX_ACK_MS " + maxAck[0]);
        }
        System.out.flush();
    }

    static void timedConsume(String bootstrap, String topic, String group) {
        KafkaShareConsumer<String, String> consumer = shareConsumer(bootstrap, group, false);
        AtomicBoolean stopping = stopOnSigterm(consumer);
        consumer.subscribe(Set.of(topic));
        try {
            while (!stopping.get()) {
                ConsumerRecords<String, String> records;
                try {
                    records = consumer.poll(Duration.ofMillis(100));
                } catch (WakeupException e) {
                    break;
                } catch (KafkaException e) {
                    System.out.println("ERROR poll " + e);
                    continue;
                }
                long now = System.currentTimeMillis();
                StringBuilder b = new StringBuilder();
                for (ConsumerRecord<String, String> r : records) {
                    b.append(now).append(' ').append(r.partition()).append(' ').append(r.offset()).append(' ')
                        .append(r.deliveryCount().orElse((short) -1)).append('\n');
                }
                System.out.print(b);
                System.out.flush();
            }
        } finally {
            consumer.close(Duration.ofSeconds(10));
        }
    }

    static void jmx(String[] objectNames, String[] attributes, String[] pids) throws Exception {
        for (String pid : pids) {
            com.sun.tools.attach.VirtualMachine vm = com.sun.tools.attach.VirtualMachine.attach(pid);
            try {
                String address = vm.startLocalManagementAgent();
                try (javax.management.remote.JMXConnector c = javax.management.remote.JMXConnectorFactory.connect(
                        new javax.management.remote.JMXServiceURL(address))) {
                    javax.management.MBeanServerConnection server = c.getMBeanServerConnection();
                    for (String objectName : objectNames) {
                        javax.management.ObjectName name = new javax.management.ObjectName(objectName);
                        for (String attribute : attributes) {
                            Object value;
                            try {
                                value = server.getAttribute(name, attribute);
                            } catch (javax.management.InstanceNotFoundException | javax.management.AttributeNotFoundException e) {
                                value = -1;
                            }
                            System.out.println(pid + " " + objectName + " " + attribute + " " + value);
                        }
                    }
                }
            } finally {
                vm.detach();
            }
        }
    }
}
