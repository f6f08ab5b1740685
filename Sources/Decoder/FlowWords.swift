// The human words of `dump --flow` and `--svg` in each Language (issue #28). Every switch lists
// every case with no `default`: a step kind or a language without its words does not compile.

extension FlowStepKind {
    /// The step's title ("scan", "扫描").
    public func title(_ language: Language) -> String {
        switch language {
        case .english: return rawValue
        case .simplifiedChinese:
            switch self {
            case .powerOn: return "上电"
            case .advertise: return "广播"
            case .stopAdvertising: return "停止广播"
            case .scan: return "扫描"
            case .stopScan: return "停止扫描"
            case .connect: return "连接"
            case .connectionParameters: return "更新连接参数"
            case .exchangeMTU: return "交换 MTU"
            case .discoverServices: return "发现服务"
            case .discoverIncludedServices: return "发现包含服务"
            case .discoverCharacteristics: return "发现特征"
            case .discoverDescriptors: return "发现描述符"
            case .read: return "读"
            case .write: return "写"
            case .subscribe: return "订阅"
            case .unsubscribe: return "取消订阅"
            case .notify: return "通知"
            case .indicate: return "指示"
            case .l2capChannel: return "L2CAP 信道"
            case .enhancedATT: return "EATT 承载"
            case .reconfigureChannels: return "重新配置 L2CAP 信道"
            case .pair: return "配对"
            case .encrypt: return "加密"
            case .disconnect: return "断开连接"
            }
        }
    }

    /// What CoreBluetooth calls the step: API names stay as Apple spells them, only the
    /// explanations in parentheses are translated.
    public func coreBluetooth(asServer: Bool, language: Language) -> String {
        switch language {
        case .english: return coreBluetooth(asServer: asServer)
        case .simplifiedChinese:
            switch self {
            case .powerOn, .advertise, .scan, .stopScan, .stopAdvertising, .read, .write, .subscribe,
                 .unsubscribe, .notify, .l2capChannel:
                return coreBluetooth(asServer: asServer)  // API names only
            case .connect: return asServer ? "（有中心设备连入：CBPeripheralManager 没有对应的回调）" : coreBluetooth(asServer: asServer)
            case .connectionParameters: return "（无：CoreBluetooth 自行协商连接参数）"
            case .exchangeMTU: return asServer ? "（自动）central.maximumUpdateValueLength" : "（自动）peripheral.maximumWriteValueLength(for:)"
            case .discoverServices, .discoverIncludedServices, .discoverCharacteristics, .discoverDescriptors:
                return asServer ? "（由 CBPeripheralManager 按 add(_:) 加入的服务应答）" : coreBluetooth(asServer: asServer)
            case .indicate: return asServer ? "peripheralManager.updateValue(_:for:onSubscribedCentrals:)（指示）" : "peripheral(_:didUpdateValueFor:error:)（指示）"
            case .pair: return "（系统配对：由 Insufficient Authentication/Encryption 错误应答或 Security Request 触发）"
            case .encrypt: return "（系统：用配对得到的密钥加密链路）"
            case .enhancedATT: return "（系统：操作系统自行建立增强 ATT 承载，没有 CoreBluetooth 调用）"
            case .reconfigureChannels: return "（系统：协议栈自行提高信道的 MTU，没有 CoreBluetooth 调用）"
            case .disconnect: return asServer ? "（中心设备断开了连接：CBPeripheralManager 没有对应的回调）" : coreBluetooth(asServer: asServer)
            }
        }
    }
}

extension LinkLayerState {
    /// The states in `language` (Vol 6 Part B 1.1: standby, advertising, scanning, initiating,
    /// connection).
    public func text(_ language: Language) -> String {
        switch language {
        case .english: return description
        case .simplifiedChinese:
            var parts: [String] = []
            if advertising { parts.append("广播") }
            if scanning { parts.append("扫描") }
            if initiating { parts.append("发起连接") }
            if !connections.isEmpty { parts.append("已连接（\(connections.count) 条链路）") }
            return parts.isEmpty ? "待机" : parts.joined(separator: " + ")
        }
    }
}

/// The diagram's own words (headers, column titles), in each language.
enum FlowWords {
    case summary(packets: Int, steps: Int)
    case host
    case controller
    case timeColumn
    case columns
    case linkLayer
    /// Peer column titles are addresses, except the shared columns FlowBuilder names.
    case peer(String)

    func text(_ language: Language) -> String {
        switch language {
        case .english:
            switch self {
            case let .summary(packets, steps): return "\(packets) packets in \(steps) steps"
            case .host: return "host"
            case .controller: return "controller"
            case .timeColumn: return "time (s)"
            case .columns: return "; columns: "
            case .linkLayer: return "link layer"
            case .peer(let title): return title
            }
        case .simplifiedChinese:
            switch self {
            case let .summary(packets, steps): return "\(packets) 个包，\(steps) 个步骤"
            // "主机" alone is what Chinese tutorials call the central: say host stack.
            case .host: return "主机协议栈"
            case .controller: return "控制器"
            case .timeColumn: return "时间 (秒)"
            case .columns: return "；列："
            case .linkLayer: return "链路层"
            case .peer(let title):
                switch title {
                case "other advertisers": return "其他广播者"
                case "other devices": return "其他设备"
                default: return title
                }
            }
        }
    }

    static func columnTitles(_ d: FlowDiagram, _ language: Language) -> [String] {
        [host.text(language), controller.text(language)] + d.peers.map { peer($0).text(language) }
    }
}
